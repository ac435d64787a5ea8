"""The path every live feature depends on: a Celery task on a real worker publishes to a
conversation group, and a websocket client connected to a real Daphne receives it."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
import websockets

from sessions.tasks import conversation_notify
from tests.integration.helpers import make_conversation, receive_until, session_cookie

pytestmark = pytest.mark.integration


def test_it_delivers_a_worker_broadcast_to_a_browser_socket(live, alice):
    conversation = make_conversation(alice)
    url = f"ws://127.0.0.1:{live.web_port}/ws/conversations/{conversation.id}/"
    headers = {"Cookie": f"sessionid={session_cookie(alice)}", "Origin": f"http://127.0.0.1:{live.web_port}"}

    async def scenario() -> str:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await asyncio.sleep(0.2)  # joined the group before the task publishes
            conversation_notify.delay(str(conversation.id), "hello from the <worker>")
            return await receive_until(ws, "hello from")

    message = asyncio.run(scenario())
    assert "hello from the &lt;worker&gt;" in message  # rendered and escaped by the worker


def test_it_refuses_a_socket_for_another_users_conversation(live, alice, bob):
    conversation = make_conversation(alice)
    url = f"ws://127.0.0.1:{live.web_port}/ws/conversations/{conversation.id}/"

    async def attempt(cookie: str | None) -> int:
        headers = {"Origin": f"http://127.0.0.1:{live.web_port}"}
        if cookie:
            headers["Cookie"] = f"sessionid={cookie}"
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            async with websockets.connect(url, additional_headers=headers):
                pass
        return info.value.response.status_code

    assert asyncio.run(attempt(session_cookie(bob))) == 403
    assert asyncio.run(attempt(None)) == 403


def test_healthz_is_green_with_database_redis_and_a_worker(live, admin_user):
    from tests.integration.helpers import session_cookie, wait_for

    request = urllib.request.Request(f"http://127.0.0.1:{live.web_port}/healthz",
                                     headers={"Cookie": f"sessionid={session_cookie(admin_user)}"})

    def green():
        # An earlier test may have restarted Redis or a worker: give the stack its heartbeat interval.
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError:
            return None

    status, body = wait_for(green, timeout=30, interval=1, what="a green /healthz")
    assert status == 200
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["redis"]["ok"]
    assert any(name.startswith("worker@") for name in body["workers"]["alive"])
