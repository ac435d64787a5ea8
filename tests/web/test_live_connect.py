"""A socket's connect sends the live state only when the page's copy is stale: the conversation
page names the state it shows in its socket's URL (``?live=<version>``); a connect that finds the
same state in the database sends a comment instead of the panels; anything else (no version,
a malformed one, a change since, a reconnect after missed events) gets the whole state as
before."""
from __future__ import annotations

import html
import re

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from compression import settings_store
from hermes_web.asgi import application
from sessions import fragments, live, presenters
from sessions.consumers import shown_version
from sessions.models import CompressionEvent, Conversation
from sessions.services.context import message_append, session_active, session_start

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

ORIGIN = (b"origin", b"http://127.0.0.1")
WS_CONNECT = re.compile(r'ws-connect="([^"]+)"')


def conversation_with_a_question(owner) -> Conversation:
    c = Conversation.objects.create(owner=owner, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=c)
    message_append(session=session, role="user", content="the first question")
    message_append(session=session, role="assistant", content="the first answer")
    return c


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def socket_url_of_page(client: Client, c: Conversation) -> str:
    """The socket URL the conversation page is served with."""
    body = client.get(reverse("conversation", args=[c.id])).content.decode()
    return html.unescape(WS_CONNECT.search(body).group(1))


async def connect(client: Client, url: str) -> tuple[WebsocketCommunicator, str]:
    cookie = client.cookies["sessionid"].value
    communicator = WebsocketCommunicator(application, url, headers=[ORIGIN, (b"cookie", f"sessionid={cookie}".encode())])
    connected, _ = await communicator.connect()
    assert connected
    return communicator, await communicator.receive_from(timeout=5)


async def test_a_socket_opened_by_a_page_just_served_is_told_it_is_in_step(alice):
    c = await sync_to_async(conversation_with_a_question)(alice)
    client = await sync_to_async(signed_in)(alice)
    url = await sync_to_async(socket_url_of_page)(client, c)
    assert re.fullmatch(rf"/ws/conversations/{c.id}/\?live=[0-9a-f]{{32}}", url)
    communicator, first = await connect(client, url)
    assert first == fragments.LIVE_SYNCED
    # Still a live socket: later pushes arrive as before.
    message = await sync_to_async(lambda: message_append(session=session_active(c), role="user", content="pushed later"))()
    await sync_to_async(live.message_added)(message)
    assert "pushed later" in await communicator.receive_from(timeout=5)
    await communicator.disconnect()


@pytest.mark.parametrize("suffix", ["", "?live=", "?live=0123", "?live=" + "0" * 32, "?live=%ff%fe", "?other=1"])
async def test_a_socket_without_the_pages_version_gets_the_whole_state(alice, suffix):
    c = await sync_to_async(conversation_with_a_question)(alice)
    client = await sync_to_async(signed_in)(alice)
    communicator, first = await connect(client, f"/ws/conversations/{c.id}/{suffix}")
    assert 'id="gauge"' in first and "the first answer" in first
    await communicator.disconnect()


async def test_another_conversations_version_gets_the_whole_state(alice):
    c, other = await sync_to_async(conversation_with_a_question)(alice), await sync_to_async(conversation_with_a_question)(alice)
    client = await sync_to_async(signed_in)(alice)
    url = await sync_to_async(socket_url_of_page)(client, other)
    communicator, first = await connect(client, url.replace(str(other.id), str(c.id)))
    assert 'id="gauge"' in first
    await communicator.disconnect()


def _message_added(c):
    message_append(session=session_active(c), role="user", content="written while the socket was down")
    return "written while the socket was down"


def _compression_event(c):
    event = CompressionEvent.objects.create(conversation=c, session=session_active(c), trigger="manual",
                                            status="compressed", messages_before=2, messages_after=1)
    return f'id="event-{event.id}"'


def _gauge_moved(c):
    before = presenters.gauge(c)["threshold"]
    settings_store.save_group("compression", {"threshold": 0.75})
    after = presenters.gauge(c)["threshold"]
    assert after > before
    return f'data-threshold="{after}"'


@pytest.mark.parametrize("change", [_message_added, _compression_event, _gauge_moved], ids=lambda f: f.__name__)
async def test_a_reconnect_after_a_change_it_missed_gets_the_whole_state_with_the_change(alice, change):
    c = await sync_to_async(conversation_with_a_question)(alice)
    client = await sync_to_async(signed_in)(alice)
    url = await sync_to_async(socket_url_of_page)(client, c)
    communicator, first = await connect(client, url)
    assert first == fragments.LIVE_SYNCED
    await communicator.disconnect()

    shown = await sync_to_async(change)(c)

    communicator, first = await connect(client, url)  # the same URL: what the page was served with
    assert shown in first and 'id="transcript"' in first
    await communicator.disconnect()
    # A reload serves the page at the new version: in step again.
    communicator, first = await connect(client, await sync_to_async(socket_url_of_page)(client, c))
    assert first == fragments.LIVE_SYNCED
    await communicator.disconnect()


async def test_a_reconnect_with_nothing_changed_is_in_step_again(alice):
    c = await sync_to_async(conversation_with_a_question)(alice)
    client = await sync_to_async(signed_in)(alice)
    url = await sync_to_async(socket_url_of_page)(client, c)
    for _ in range(2):
        communicator, first = await connect(client, url)
        assert first == fragments.LIVE_SYNCED
        await communicator.disconnect()


async def test_the_version_does_not_open_another_users_conversation(alice, bob):
    c = await sync_to_async(conversation_with_a_question)(alice)
    url = await sync_to_async(socket_url_of_page)(await sync_to_async(signed_in)(alice), c)
    bobs = await sync_to_async(signed_in)(bob)
    cookie = bobs.cookies["sessionid"].value
    communicator = WebsocketCommunicator(application, url, headers=[ORIGIN, (b"cookie", f"sessionid={cookie}".encode())])
    connected, _ = await communicator.connect()
    assert not connected
    await communicator.disconnect()


@pytest.mark.parametrize("query, expected", [
    (b"live=" + b"a" * 32, "a" * 32), (b"", ""), (b"live=" + b"A" * 32, ""), (b"live=" + b"a" * 33, ""),
    (b"live=\xff", ""), (b"live=" + b"a" * 32 + b"&live=" + b"b" * 32, "a" * 32), (b"x=1&" * 10, ""),
])
async def test_the_consumer_reads_only_a_well_formed_version(query, expected):
    assert shown_version({"query_string": query}) == expected
