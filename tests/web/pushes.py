"""A listener on a conversation's channel group, as an open page's socket is: what the product
pushes there is read back without a browser (the fast tier's in-memory channel layer)."""
from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from sessions.events import group_name


class Page:
    """A member of the conversation's group, as an open page's socket is."""

    def __init__(self, conversation) -> None:
        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(group_name(conversation.id), self.channel)

    def received(self) -> list[dict]:
        """Everything pushed so far (the in-memory layer delivers at once; a short wait ends it)."""
        async def drain() -> list[dict]:
            events = []
            while True:
                try:
                    events.append(await asyncio.wait_for(self.layer.receive(self.channel), 0.2))
                except TimeoutError:
                    return events

        return async_to_sync(drain)()

    def html(self) -> str:
        """The fragments pushed so far, joined."""
        return "".join(e["html"] for e in self.received())
