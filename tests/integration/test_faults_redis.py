"""Redis restarts under a running application: the worker that was mid-turn keeps serving, and the
first live event after Redis returns still reaches the browser."""
from __future__ import annotations

import asyncio
import re
import signal
import time
from datetime import datetime

import pytest
import websockets

from sessions.models import Turn
from sessions.services.turns import turn_submit
from sessions.tasks import conversation_notify
from tests.integration.helpers import make_conversation, receive_until, session_cookie, sim_control, wait_for, wait_turn

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    # Leave the shared stack whole for the next test, whatever this one did to it.
    if live.procs.get("redis") is None or live.procs["redis"].poll() is not None:
        live.procs.pop("redis", None)
        live.start_redis()
    if live.procs.get("worker") is None or live.procs["worker"].poll() is not None:
        live.procs.pop("worker", None)
        live.start_worker()


def socket_url(live, conversation) -> str:
    return f"ws://127.0.0.1:{live.web_port}/ws/conversations/{conversation.id}/"


def socket_headers(live, user) -> dict:
    return {"Cookie": f"sessionid={session_cookie(user)}", "Origin": f"http://127.0.0.1:{live.web_port}"}


def submit(user, conversation_id, text: str) -> Turn:
    """turn_submit from a helper thread, closing that thread's database connection after."""
    from django.db import connection

    try:
        return turn_submit(user=user, conversation_id=conversation_id, text=text)[0]
    finally:
        connection.close()


def restart_redis(live, down_for: float = 0.0) -> float:
    """SIGKILL Redis and start it again on the same port (empty: it keeps no data) after `down_for`
    seconds; returns the moment it listens again."""
    live.kill("redis", signal.SIGKILL)
    time.sleep(down_for)
    live.start_redis()
    return time.monotonic()


def broker_reconnects(log: str) -> int:
    return len(re.findall(r"Connected to redis://", log))


def reconnect_seconds(log: str) -> float:
    """From the worker's "Connection to broker lost" to its next "Connected to", by its log."""
    stamp = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}):"
    lost = re.search(stamp + r"[^\n]*Connection to broker lost", log)
    again = re.search(stamp + r"[^\n]*Connected to redis://", log[lost.end():])

    def parse(text):
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f")

    return (parse(again.group(1)) - parse(lost.group(1))).total_seconds()


@pytest.mark.parametrize("down_for", [0.0, 3.0], ids=["restarted-at-once", "down-3s"])
def test_a_redis_restart_mid_turn_leaves_the_same_worker_serving(live, alice, down_for):
    worker = live.procs["worker"]
    conversation = make_conversation(alice)
    url, headers = socket_url(live, conversation), socket_headers(live, alice)
    # Every streamed event of the next reply waits 0.2 s: the turn is mid-stream for seconds, its
    # task delivered and not yet acknowledged (task_acks_late).
    sim_control(live, "/_sim/faults", {"fault": "slow=0.2", "count": 1})

    async def first_turn() -> Turn:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')
            turn = await asyncio.to_thread(submit, alice, conversation.id, "reply with 60 words about resilience")
            await receive_until(ws, "stream-", timeout=30)  # the reply is streaming
            return turn

    log_start = len(live.log("worker"))
    turn = asyncio.run(first_turn())
    assert Turn.objects.get(id=turn.id).status == "running"
    connects_before = broker_reconnects(live.log("worker"))
    back = restart_redis(live, down_for)
    wait_turn(turn, timeout=90)
    first_done = time.monotonic() - back

    # The worker outlives the end of the task it was running when the broker went away ...
    def settled():
        return worker.poll() is not None or broker_reconnects(live.log("worker")) > connects_before

    wait_for(settled, 30, what="the worker to reconnect to the broker or exit")
    assert worker.poll() is None, f"the worker exited with {worker.returncode}:\n{live.log('worker')[-4000:]}"

    # ... and the same process takes the next turn and streams it to a socket.
    async def next_turn() -> str:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')
            await asyncio.to_thread(submit, alice, conversation.id, "reply with 10 words about recovery")
            return await receive_until(ws, 'data-role="assistant"', timeout=60)

    assert "Assistant" in asyncio.run(next_turn())
    served = time.monotonic() - back
    last = wait_turn(Turn.objects.filter(conversation=conversation).latest("id"))
    assert last.status == "done", last.error
    assert worker.poll() is None and live.procs["worker"] is worker
    log = live.log("worker")[log_start:]
    assert "Unrecoverable error" not in log, log[-4000:]
    print(f"\nRedis restart mid-turn (down {down_for:.0f}s): worker back on the broker {reconnect_seconds(log):.2f}s after it lost it; "
          f"interrupted turn done {first_done:.1f}s and next turn streamed {served:.1f}s after Redis listened again")


def test_the_first_broadcast_after_a_redis_restart_reaches_the_socket(live, alice):
    conversation = make_conversation(alice)
    url, headers = socket_url(live, conversation), socket_headers(live, alice)

    async def notice(text: str) -> str:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')  # joined the group
            await asyncio.to_thread(conversation_notify.delay, str(conversation.id), text)
            return await receive_until(ws, text, timeout=20)

    log_start = len(live.log("worker"))
    # Both the worker's publisher and the web process hold pooled Redis connections now.
    assert "before the restart" in asyncio.run(notice("before the restart"))
    connects_before = broker_reconnects(live.log("worker"))
    restart_redis(live)
    wait_for(lambda: broker_reconnects(live.log("worker")) > connects_before, 30,
             what="the worker to reconnect to the broker")

    # The socket's group_add and the worker's broadcast are each the first command on a pooled
    # connection opened before the restart.
    assert "after the restart" in asyncio.run(notice("after the restart"))
    assert "broadcast of notice" not in live.log("worker")[log_start:]
