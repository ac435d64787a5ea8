"""The conversation socket resolves its user in the same database trip as the rest of its connect
(`sessions.socket_auth`), with Channels' rules: an anonymous socket is refused with 4401, another
user's conversation with 4404, a session made before a password change is refused (and flushed),
and a refused socket is left in no group. The user it finds is the one ``channels.auth.get_user``
finds, whatever the session holds. And the connect is the one trip to the database thread: no
trip of Channels' own before it, nor before each relayed event."""
from __future__ import annotations

import datetime
import html
import re

import pytest
from asgiref.sync import SyncToAsync, async_to_sync, sync_to_async
from channels.auth import get_user as channels_get_user
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from hermes_web.asgi import application
from sessions import fragments, live, socket_auth
from sessions.events import SETTINGS_GROUP, group_name
from sessions.models import Conversation
from sessions.services.context import message_append, session_start

ORIGIN = (b"origin", b"http://127.0.0.1")
WS_CONNECT = re.compile(r'ws-connect="([^"]+)"')
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


def conversation_of(owner) -> Conversation:
    c = Conversation.objects.create(owner=owner, provider="simulator", model="sim-claude-200k")
    message_append(session=session_start(conversation=c), role="user", content="a question")
    return c


def cookie_of(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def page_socket_url(user, c: Conversation) -> str:
    client = Client()
    client.force_login(user)
    body = client.get(reverse("conversation", args=[c.id])).content.decode()
    return html.unescape(WS_CONNECT.search(body).group(1))


async def open_socket(url: str, cookie: str | None) -> tuple[WebsocketCommunicator, bool, int | None]:
    headers = [ORIGIN] + ([(b"cookie", f"sessionid={cookie}".encode())] if cookie else [])
    communicator = WebsocketCommunicator(application, url, headers=headers)
    connected, code = await communicator.connect(timeout=5)
    return communicator, connected, code


def members(c: Conversation) -> dict:
    groups = get_channel_layer().groups
    return {name: dict(groups.get(name, {})) for name in (group_name(c.id), SETTINGS_GROUP)}


# --- Refusals ------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("cookie", [None, "", "short", "x" * 32], ids=["no cookie", "empty", "not a key", "unknown key"])
async def test_an_anonymous_socket_is_refused_with_4401_and_left_in_no_group(alice, cookie):
    c = await sync_to_async(conversation_of)(alice)
    communicator, connected, code = await open_socket(f"/ws/conversations/{c.id}/", cookie)
    assert (connected, code) == (False, 4401)
    assert members(c) == {group_name(c.id): {}, SETTINGS_GROUP: {}}
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_another_users_conversation_is_refused_with_4404_and_left_in_no_group(alice, bob):
    c = await sync_to_async(conversation_of)(alice)
    communicator, connected, code = await open_socket(f"/ws/conversations/{c.id}/", await sync_to_async(cookie_of)(bob))
    assert (connected, code) == (False, 4404)
    assert members(c) == {group_name(c.id): {}, SETTINGS_GROUP: {}}
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_session_made_before_a_password_change_is_refused_and_flushed(alice):
    c = await sync_to_async(conversation_of)(alice)
    url = f"/ws/conversations/{c.id}/"
    old = await sync_to_async(cookie_of)(alice)
    communicator, connected, _ = await open_socket(url, old)
    assert connected
    await communicator.disconnect()

    def change_password():
        alice.set_password("a-new-password-2")
        alice.save()

    await sync_to_async(change_password)()
    communicator, connected, code = await open_socket(url, old)
    assert (connected, code) == (False, 4401)
    assert members(c) == {group_name(c.id): {}, SETTINGS_GROUP: {}}
    assert not await Session.objects.filter(session_key=old).aexists()  # flushed, as Channels' get_user does
    await communicator.disconnect()
    # A session made after the change opens the socket.
    communicator, connected, _ = await open_socket(url, await sync_to_async(cookie_of)(alice))
    assert connected
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_inactive_user_is_refused_with_4401(alice):
    c = await sync_to_async(conversation_of)(alice)
    cookie = await sync_to_async(cookie_of)(alice)
    alice.is_active = False
    await alice.asave()
    communicator, connected, code = await open_socket(f"/ws/conversations/{c.id}/", cookie)
    assert (connected, code) == (False, 4401)
    await communicator.disconnect()


# --- One trip, join first --------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_connect_makes_one_trip_to_the_database_thread_and_a_relayed_event_none(alice, monkeypatch):
    """Not Channels' AuthMiddleware's trip, nor the one Channels' consumers make before every
    message to close stale connections: only the connect's reads, which close them themselves."""
    c = await sync_to_async(conversation_of)(alice)
    url = await sync_to_async(page_socket_url)(alice, c)
    cookie = await sync_to_async(cookie_of)(alice)
    trips = []
    handler = SyncToAsync.thread_handler

    def counted(self, *args, **kwargs):
        trips.append(self.func)
        return handler(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "thread_handler", counted)
    communicator, connected, _ = await open_socket(url, cookie)
    assert connected
    assert await communicator.receive_from(timeout=5) == fragments.LIVE_SYNCED
    await get_channel_layer().group_send(group_name(c.id), {"type": "conversation.event", "kind": "notice", "html": "<p>hi</p>"})
    assert await communicator.receive_from(timeout=5) == "<p>hi</p>"
    await communicator.disconnect()
    assert trips == [socket_auth.connect_state]


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_an_event_pushed_while_the_connect_reads_arrives_after_the_state(alice, monkeypatch):
    """The groups are joined before the user and the state are read: an event pushed meanwhile is
    relayed right after the state, not lost."""
    c = await sync_to_async(conversation_of)(alice)
    read = live.connect_state

    def push_then_read(**kwargs):
        async_to_sync(get_channel_layer().group_send)(
            group_name(c.id), {"type": "conversation.event", "kind": "notice", "html": "<p>meanwhile</p>"})
        return read(**kwargs)

    monkeypatch.setattr(live, "connect_state", push_then_read)
    communicator, connected, _ = await open_socket(f"/ws/conversations/{c.id}/", await sync_to_async(cookie_of)(alice))
    assert connected
    assert 'id="gauge"' in await communicator.receive_from(timeout=5)
    assert await communicator.receive_from(timeout=5) == "<p>meanwhile</p>"
    await communicator.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_connect_whose_reads_fail_leaves_the_groups_it_joined(alice, monkeypatch):
    c = await sync_to_async(conversation_of)(alice)

    def fail(**kwargs):
        raise ConnectionError("the database went away")

    monkeypatch.setattr(live, "connect_state", fail)
    communicator = WebsocketCommunicator(application, f"/ws/conversations/{c.id}/",
                                         headers=[ORIGIN, (b"cookie", f"sessionid={await sync_to_async(cookie_of)(alice)}".encode())])
    with pytest.raises(ConnectionError):
        await communicator.connect(timeout=5)
    assert members(c) == {group_name(c.id): {}, SETTINGS_GROUP: {}}


# --- The trip's queries ----------------------------------------------------------------------------


def scope_of(cookie: str) -> dict:
    session = socket_auth.session_store_class()(cookie)
    return {"session": session, "user": SimpleLazyObject(lambda: socket_auth.socket_user(session))}


@pytest.mark.django_db
def test_the_connect_of_a_current_page_takes_four_queries(alice, django_assert_max_num_queries):
    """The session, the user, the settings, the conversation with its marks."""
    c = conversation_of(alice)
    shown = live.state_version(c, live.current_config())
    scope = scope_of(cookie_of(alice))
    with django_assert_max_num_queries(4):
        assert socket_auth.connect_state(scope, conversation_id=c.id, shown=shown) == (True, c, fragments.LIVE_SYNCED)


@pytest.mark.django_db
def test_the_connect_of_a_stale_page_takes_the_live_states_queries_and_two(alice, django_assert_max_num_queries):
    c = conversation_of(alice)
    scope = scope_of(cookie_of(alice))
    with django_assert_max_num_queries(11):  # live.connect_state's nine (tests/web/test_live_version.py)
        signed_in, conversation, state = socket_auth.connect_state(scope, conversation_id=c.id, shown="")
    assert signed_in and conversation == c and 'id="gauge"' in state


# --- The user it finds is Channels' -----------------------------------------------------------------


def stored_session(data: dict, *, expired: bool = False) -> str:
    session = SessionStore()
    session.update(data)
    session.create()
    if expired:
        Session.objects.filter(session_key=session.session_key).update(
            expire_date=timezone.now() - datetime.timedelta(seconds=1))
    return session.session_key


def login_data(user, **changes) -> dict:
    data = {SESSION_KEY: str(user.pk), BACKEND_SESSION_KEY: MODEL_BACKEND, HASH_SESSION_KEY: user.get_session_auth_hash()}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def outcome(resolve, key: str) -> tuple:
    user = resolve(key)
    return type(user).__name__, user.pk, Session.objects.filter(session_key=key).exists()


CASES = {
    "signed in": lambda u: (login_data(u), {}),
    "no hash": lambda u: (login_data(u, **{HASH_SESSION_KEY: None}), {}),
    "another hash": lambda u: (login_data(u, **{HASH_SESSION_KEY: "0" * 64}), {}),
    "no backend": lambda u: (login_data(u, **{BACKEND_SESSION_KEY: None}), {}),
    "a backend not configured": lambda u: (login_data(u, **{BACKEND_SESSION_KEY: "some.Backend"}), {}),
    "a user that is gone": lambda u: (login_data(u, **{SESSION_KEY: "987654"}), {}),
    "no user": lambda u: ({"other": 1}, {}),
    "expired": lambda u: (login_data(u), {"expired": True}),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", CASES)
def test_socket_user_finds_the_user_channels_finds(alice, case):
    data, options = CASES[case](alice)
    ours, theirs = stored_session(data, **options), stored_session(data, **options)
    expected = outcome(lambda key: channels_get_user.func({"session": SessionStore(key)}), theirs)
    found = outcome(lambda key: socket_auth.socket_user(socket_auth.session_store_class()(key)), ours)
    assert found == expected
    assert found[0] == ("User" if case == "signed in" else "AnonymousUser")


@pytest.mark.django_db
def test_socket_user_finds_an_inactive_user_as_channels_does(alice):
    key, other = stored_session(login_data(alice)), stored_session(login_data(alice))
    alice.is_active = False
    alice.save()
    assert socket_auth.socket_user(socket_auth.session_store_class()(key)).is_authenticated is False
    assert channels_get_user.func({"session": SessionStore(other)}).is_authenticated is False


@pytest.mark.django_db
def test_a_cookie_that_names_no_session_reads_nothing(alice, django_assert_num_queries):
    for key in (None, "short"):
        with django_assert_num_queries(0):
            assert not socket_auth.socket_user(socket_auth.session_store_class()(key)).is_authenticated


class OneUserBackend:
    """A backend that finds users its own way: the regular path asks it."""

    asked: list = []

    def get_user(self, user_id):
        from django.contrib.auth import get_user_model

        self.asked.append(user_id)
        return get_user_model().objects.filter(pk=user_id).first()


@pytest.mark.django_db
def test_another_backend_finds_the_user_its_own_way(alice, settings):
    path = f"{__name__}.OneUserBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, path]
    OneUserBackend.asked.clear()
    key = stored_session(login_data(alice, **{BACKEND_SESSION_KEY: path}))
    assert socket_auth.socket_user(socket_auth.session_store_class()(key)) == alice
    assert OneUserBackend.asked == [alice.pk]


@pytest.mark.django_db
def test_another_session_engine_is_used_as_it_is(alice, settings):
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    store = socket_auth.session_store_class()
    assert store.__module__ == "django.contrib.sessions.backends.signed_cookies"
    session = store()
    session.update(login_data(alice))
    session.save()
    assert socket_auth.socket_user(store(session.session_key)) == alice


@pytest.mark.django_db
def test_the_database_store_reads_what_djangos_wrote(alice):
    """Same data, same signature salt: a session Django's store wrote loads, and a change to its
    data made through Django's store is seen."""
    key = stored_session(login_data(alice, extra="one"))
    assert socket_auth.session_store_class()(key).load() == SessionStore(key).load()
    django_store = SessionStore(key)
    django_store["extra"] = "two"
    django_store.save()
    assert socket_auth.session_store_class()(key)["extra"] == "two"
