from __future__ import annotations

import pytest
from django.urls import reverse

from sessions.models import CompressionEvent, Conversation, Message
from sessions.services.context import message_append, session_active, session_start

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def fill(conversation, pairs: int) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"question {i} " + "word " * 300)
        message_append(session=session, role="assistant", content=f"answer {i} " + "word " * 300)


@pytest.mark.django_db
def test_it_previews_a_compression_without_changing_anything(client, alice, conversation):
    fill(conversation, 15)
    client.force_login(alice)
    before = list(Message.objects.values_list("id", "archived"))
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/compress --preview"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "would be summarised" in body and "Nothing was changed" in body
    assert list(Message.objects.values_list("id", "archived")) == before
    assert not CompressionEvent.objects.exists()


@pytest.mark.django_db
def test_it_says_there_is_nothing_to_compress_in_a_short_conversation(client, alice, conversation):
    fill(conversation, 1)
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/compress"}, **HTMX)
    assert "at least 4 messages" in response.content.decode()
    assert not CompressionEvent.objects.exists()


@pytest.mark.django_db
def test_it_queues_a_focused_compression(client, alice, conversation, django_capture_on_commit_callbacks):
    fill(conversation, 15)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/compress auth flow"}, **HTMX)
    assert "focusing on “auth flow”" in response.content.decode()
    event = CompressionEvent.objects.get()
    assert (event.status, event.trigger, event.focus_topic) == ("queued", "manual", "auth flow")
    assert len(callbacks) == 1  # the job is enqueued when the request commits


@pytest.mark.django_db
def test_new_starts_a_fresh_conversation(client, alice, conversation):
    fill(conversation, 1)  # an empty conversation would be reused instead (tests/web/test_sidebar.py)
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/new"}, **HTMX)
    assert Conversation.objects.filter(owner=alice).count() == 2
    newest = Conversation.objects.filter(owner=alice).latest("created_at")
    assert response["HX-Redirect"] == reverse("conversation", args=[newest.id])


@pytest.mark.django_db
def test_an_empty_message_is_refused_with_a_reason(client, alice, conversation):
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "   "}, **HTMX)
    assert response.status_code == 422
    assert "empty" in response.content.decode()
    assert not Message.objects.exists()


@pytest.mark.django_db
def test_user_text_is_escaped_in_the_transcript(client, alice, conversation):
    message_append(session=session_active(conversation), role="user", content="<script>alert(1)</script>")
    client.force_login(alice)
    body = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body


@pytest.mark.django_db
def test_archived_originals_are_only_visible_to_the_owner(client, alice, bob, conversation):
    from sessions.services.compaction import compression_inline
    from simulator import start_simulator

    fill(conversation, 12)
    with start_simulator() as sim:
        from django.conf import settings

        settings.HERMES_SIMULATOR_URL = sim.base_url
        event = compression_inline(conversation_id=conversation.id, trigger="manual", force=True).event
    assert event.status == "compressed"
    url = reverse("compaction-originals", args=[conversation.id, event.id])
    client.force_login(bob)
    assert client.get(url).status_code == 404
    client.force_login(alice)
    body = client.get(url).content.decode()
    assert body.count('data-role="user"') == 12 and "question 0" in body


@pytest.mark.django_db
def test_a_repeated_manual_request_moments_later_is_skipped(client, alice, conversation, django_capture_on_commit_callbacks):
    fill(conversation, 15)
    client.force_login(alice)
    url = reverse("conversation-send", args=[conversation.id])
    with django_capture_on_commit_callbacks(execute=False):
        client.post(url, {"text": "/compress"}, **HTMX)
    from sessions.models import ConversationLock
    from sessions.services.locks import lock_release

    lock = ConversationLock.objects.get(kind="compression")
    lock_release(conversation_id=conversation.id, kind="compression", holder=lock.holder)  # as if it finished
    CompressionEvent.objects.update(status="compressed")
    response = client.post(url, {"text": "/compress"}, **HTMX)
    assert "taken as a double click" in response.content.decode()
    assert list(CompressionEvent.objects.order_by("id").values_list("status", flat=True)) == ["compressed", "skipped"]
    # Recorded as a repeat, not as a clash with a running compression.
    assert CompressionEvent.objects.get(status="skipped").reason == "a repeat of the same request moments after it ran"
    # A different focus topic is a different request.
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(url, {"text": "/compress auth flow"}, **HTMX)
    assert "queued" in response.content.decode()


@pytest.mark.django_db
def test_a_manual_compression_is_refused_while_compression_is_switched_off(client, alice, conversation):
    from compression import settings_store

    fill(conversation, 15)
    settings_store.save_group("compression", {"enabled": False})
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/compress"}, **HTMX)
    assert "Compression is switched off" in response.content.decode()
    assert not CompressionEvent.objects.exists()
