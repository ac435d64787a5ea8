from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from django.urls import reverse

from hermes_web.asgi import application
from sessions.models import Conversation, Session

ORIGIN = [(b"origin", b"http://127.0.0.1")]


def make_conversation(user) -> Conversation:
    conversation = Conversation.objects.create(owner=user)
    Session.objects.create(conversation=conversation)
    return conversation


@pytest.mark.django_db
def test_it_redirects_anonymous_users_to_login(client):
    response = client.get(reverse("home"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.django_db
def test_it_renders_the_login_page(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="password"' in response.content
    assert b"csrfmiddlewaretoken" in response.content


@pytest.mark.django_db
def test_it_logs_in_and_shows_the_home_page(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "alice-password-1"}, follow=True)
    assert response.status_code == 200
    assert b"Conversations" in response.content
    assert b"alice" in response.content


@pytest.mark.django_db
def test_it_creates_a_conversation_with_a_session(client, alice):
    client.force_login(alice)
    response = client.post(reverse("conversation-create"))
    conversation = Conversation.objects.get(owner=alice)
    assert response["Location"] == reverse("conversation", args=[conversation.id])
    assert conversation.sessions.filter(ended_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_it_hides_another_users_conversation(client, alice, bob):
    conversation = make_conversation(alice)
    client.force_login(bob)
    assert client.get(reverse("conversation", args=[conversation.id])).status_code == 404
    client.force_login(alice)
    assert client.get(reverse("conversation", args=[conversation.id])).status_code == 200


@pytest.mark.django_db
def test_it_lists_only_the_users_own_conversations(client, alice, bob):
    from sessions.services.context import message_append, session_active

    mine = make_conversation(alice)
    mine.title = "alice's plan"
    mine.save()
    theirs = make_conversation(bob)
    theirs.title = "bob's secret"
    theirs.save()
    for c in (mine, theirs):  # empty conversations are not listed
        message_append(session=session_active(c), role="user", content="hello")
    client.force_login(alice)
    body = client.get(reverse("home")).content.decode()
    assert "alice&#x27;s plan" in body
    assert "bob" not in body.replace("Log out", "")


@pytest.mark.django_db
def test_it_rejects_get_on_create(client, alice):
    client.force_login(alice)
    assert client.get(reverse("conversation-create")).status_code == 405


@pytest.mark.django_db
def test_it_enforces_csrf_on_forms(alice):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(reverse("conversation-create")).status_code == 403


async def _connect(user, conversation_id):
    from asgiref.sync import sync_to_async
    from django.test import Client

    headers = list(ORIGIN)
    if user is not None:
        client = Client()
        await sync_to_async(client.force_login)(user)
        cookie = client.cookies["sessionid"].value
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, f"/ws/conversations/{conversation_id}/", headers=headers)
    connected, code = await communicator.connect()
    return communicator, connected, code


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_it_refuses_a_socket_without_login(alice):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(make_conversation)(alice)
    communicator, connected, _ = await _connect(None, conversation.id)
    assert not connected
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_it_refuses_a_socket_to_another_users_conversation(alice, bob):
    from asgiref.sync import sync_to_async

    conversation = await sync_to_async(make_conversation)(alice)
    communicator, connected, _ = await _connect(bob, conversation.id)
    assert not connected
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_it_relays_group_events_to_the_owners_socket(alice):
    from asgiref.sync import sync_to_async
    from channels.layers import get_channel_layer

    from sessions.events import group_name

    conversation = await sync_to_async(make_conversation)(alice)
    communicator, connected, _ = await _connect(alice, conversation.id)
    assert connected
    # A (re)connect first receives the live panels rendered from the database.
    initial = await communicator.receive_from(timeout=5)
    assert 'id="gauge"' in initial and 'id="transcript"' in initial
    await get_channel_layer().group_send(group_name(conversation.id),
                                         {"type": "conversation.event", "kind": "notice", "html": "<p>hi</p>"})
    assert await communicator.receive_from(timeout=2) == "<p>hi</p>"
    await communicator.disconnect()


@pytest.mark.django_db
def test_healthz_reports_redis_and_workers_down_without_services(client, admin_user):
    client.force_login(admin_user)  # the detail is for staff; anonymous callers get ok/degraded
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    body = response.json()
    assert body["database"]["ok"] is True
    assert body["redis"]["ok"] is False
    assert body["workers"] == {"ok": False, "alive": []}


@pytest.mark.django_db
def test_ensure_admin_prints_the_login_once(capsys, django_user_model):
    call_command("ensure_admin")
    first = capsys.readouterr().out
    assert "username: admin" in first and "password: " in first
    password = first.split("password: ")[1].split()[0]
    assert django_user_model.objects.get(username="admin").check_password(password)
    call_command("ensure_admin")
    assert "password: " not in capsys.readouterr().out
    assert django_user_model.objects.filter(is_superuser=True).count() == 1
