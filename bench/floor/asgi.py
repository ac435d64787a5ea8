"""The floor of the live path: a bare Channels consumer on the same Redis channel layer.

No auth, no origin check, no database: a socket on /ws/floor/<key>/ joins the group
``floor.<key>``, sends one fixed "ready" string (as the product sends its live panels), then relays
the ``html`` of every ``conversation.event`` it receives (the benchmark publishes a fixed string
of the same size as the product's notice). Served by its own Daphne:

    DJANGO_SETTINGS_MODULE=bench.floor.settings daphne bench.floor.asgi:application
"""
from __future__ import annotations

import asyncio
import os
import weakref

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.floor.settings"

import django

django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

READY = "floor-ready"
# Group joins and leaves in flight per process, as the product's consumer allows
# (sessions.consumers.MEMBERSHIP_IN_FLIGHT): without the bound, a burst of closing sockets fills
# the channel layer's connection pool to its cap, and the benchmark's Redis connection count would
# measure the floor's burst rather than the product's.
IN_FLIGHT = 4
_gates: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    if loop not in _gates:
        _gates[loop] = asyncio.Semaphore(IN_FLIGHT)
    return _gates[loop]


def group_name(key: str) -> str:
    return f"floor.{key}"


class FloorConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.group = group_name(self.scope["url_route"]["kwargs"]["key"])
        async with _gate():
            await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send(text_data=READY)

    async def disconnect(self, code: int) -> None:
        async with _gate():
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def conversation_event(self, event: dict) -> None:
        await self.send(text_data=event["html"])


application = ProtocolTypeRouter(
    {"websocket": URLRouter([path("ws/floor/<str:key>/", FloorConsumer.as_asgi())])}
)
