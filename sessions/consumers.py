"""The conversation websocket: join the groups, authenticate and check ownership, relay fragments."""
from __future__ import annotations

import asyncio
import re
import weakref
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer

from sessions import fragments, live, socket_auth
from sessions.events import SETTINGS_GROUP, group_name

# Group joins and leaves in flight at once in this process (each one pipelined round trip for
# both groups: `live.group_add_many`). channels_redis takes a pooled Redis connection for each
# command in flight and keeps it open afterwards, so a burst of 200 sockets closing together grew
# the web process's pool to its cap (50) at whichever pass first had such a burst; with this bound
# a socket burst uses at most this many (and the receive loop's one).
MEMBERSHIP_IN_FLIGHT = 4
_gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> its semaphore
_VERSION = re.compile(r"[0-9a-f]{32}")


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(MEMBERSHIP_IN_FLIGHT)
    return gate


def shown_version(scope) -> str:
    """The live state's version the page says it shows (``?live=`` in the socket's URL, see
    `live.state_version`); "" when absent or not one: the connect then sends the whole state."""
    try:
        value = parse_qs(scope.get("query_string", b"").decode("ascii"), max_num_fields=4).get("live", [""])[0]
    except (UnicodeDecodeError, ValueError):
        return ""
    return value if _VERSION.fullmatch(value) else ""


class ConversationConsumer(AsyncWebsocketConsumer):
    conversation = None  # set once the user is known to own it: only then are events relayed
    group: str | None = None  # the conversation's group, while joined

    async def connect(self) -> None:
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]  # a UUID (the route's converter)
        if socket_auth.without_session(self.scope):
            await self.close(code=4401)  # no session at all: refused before joining anything
            return
        # Joined before the live state is read, so an event pushed meanwhile is not lost: it is
        # relayed after the state (a consumer handles nothing else until connect returns), and
        # dropped if the user turns out not to be signed in or not to own the conversation (then
        # the groups are left at once). Who the user is, the ownership check and the live state
        # are one trip to the database thread (`socket_auth.connect_state`).
        self.group = group_name(conversation_id)
        await self._join()
        try:
            signed_in, conversation, html = await database_sync_to_async(socket_auth.connect_state)(
                self.scope, conversation_id=conversation_id, shown=shown_version(self.scope))
        except Exception:  # the database is unreachable, say: the socket fails, leaving no membership
            await self._refuse(None)
            raise
        if conversation is None:
            await self._refuse(4404 if signed_in else 4401)
            return
        self.conversation = conversation
        await self.accept()
        # A (re)connect re-renders the live panels from the database, unless the page says it
        # shows the state the database has now (`live.connect_state`): nothing shown depends on
        # an event that was missed while the socket was down.
        if html:
            await self.send(text_data=html)

    async def _refuse(self, code: int | None) -> None:
        """Leave the groups joined for the connect, then close with ``code`` (None: not at all)."""
        await self._leave()
        self.group = None
        if code is not None:
            await self.close(code=code)

    async def dispatch(self, message) -> None:
        """Channels' dispatch, without the trip to the database thread it makes before every
        handler (``aclose_old_connections``: close connections gone stale). Every database read
        here goes through ``database_sync_to_async``, which closes them before and after itself;
        and that trip queued on the one database thread behind the other sockets' connects, for
        each connect, each relayed event and each close."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def websocket_disconnect(self, message) -> None:
        # Channels' own leaves ``self.groups`` (none here: `disconnect` leaves the groups joined),
        # then makes the same trip.
        await self.disconnect(message["code"])
        raise StopConsumer()

    def _groups(self) -> list[str]:
        return [g for g in (self.group, SETTINGS_GROUP) if g]

    async def _join(self) -> None:
        async with _gate():
            await live.group_add_many(self.channel_layer, self._groups(), self.channel_name)

    async def _leave(self) -> None:
        async with _gate():
            await live.group_discard_many(self.channel_layer, self._groups(), self.channel_name)

    async def disconnect(self, code: int) -> None:
        if getattr(self, "group", None):
            await self._leave()

    async def receive(self, text_data=None, bytes_data=None) -> None:
        # The socket is server-to-browser only; messages go through the CSRF-protected form.
        return

    async def conversation_event(self, event: dict) -> None:
        if self.conversation is not None:
            await self.send(text_data=event["html"])

    async def settings_changed(self, event: dict) -> None:
        if self.conversation is None:
            return
        html = await database_sync_to_async(fragments.render_gauge)(self.conversation)
        await self.send(text_data=html)
