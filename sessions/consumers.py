"""The conversation websocket: authenticate, check ownership, join the group, relay fragments."""
from __future__ import annotations

import asyncio
import re
import weakref
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from sessions import fragments, live
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
        user = self.scope.get("user")
        conversation_id = self.scope["url_route"]["kwargs"]["conversation_id"]  # a UUID (the route's converter)
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        # Joined before the live state is read, so an event pushed meanwhile is not lost: it is
        # relayed after the state (a consumer handles nothing else until connect returns), and
        # dropped if the user turns out not to own the conversation. The ownership check and the
        # live state are one trip to the database thread (each trip opens a database connection).
        self.group = group_name(conversation_id)
        await self._join()
        conversation, html = await database_sync_to_async(live.connect_state)(
            user=user, conversation_id=conversation_id, shown=shown_version(self.scope)
        )
        if conversation is None:
            await self._leave()
            self.group = None
            await self.close(code=4404)
            return
        self.conversation = conversation
        await self.accept()
        # A (re)connect re-renders the live panels from the database, unless the page says it
        # shows the state the database has now (`live.connect_state`): nothing shown depends on
        # an event that was missed while the socket was down.
        if html:
            await self.send(text_data=html)

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
