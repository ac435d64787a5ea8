"""Shared steps of the integration tier: log in, submit turns and wait for real workers."""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request

from django.test import Client

from sessions.models import CompressionEvent, Conversation, Turn
from sessions.services.context import session_start


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def make_conversation(user, model: str = "sim-claude-64k") -> Conversation:
    conversation = Conversation.objects.create(owner=user, provider="simulator", model=model)
    session_start(conversation=conversation)
    return conversation


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_turn(turn: Turn, timeout: float = 60.0) -> Turn:
    def finished():
        turn.refresh_from_db()
        return turn.status in ("done", "failed")

    wait_for(finished, timeout, what=f"turn {turn.id}")
    return turn


def wait_compressions_settled(conversation: Conversation, timeout: float = 60.0) -> None:
    wait_for(lambda: not CompressionEvent.objects.filter(conversation=conversation, status__in=("queued", "running")).exists(),
             timeout, what="compressions to finish")


def sim_control(stack, path: str, body: dict | None = None) -> dict:
    url = stack.env["HERMES_SIMULATOR_URL"] + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


async def receive_until(ws, needle: str, timeout: float = 15.0) -> str:
    async with asyncio.timeout(timeout):
        while True:
            message = await ws.recv()
            if needle in message:
                return message
