"""Nothing stays stale: work left behind by a SIGKILLed worker, or by a send while Redis was down,
is closed or run again by the stale-work sweep of the workers still running, within about one
lease (kept alive by a heartbeat) plus one sweep interval, without any user action, and an open
page's websocket shows it. A long streamed call keeps its lease the whole time.

Real processes: Redis, the simulator, Celery workers and Daphne from tests/stack.py. The product's
defaults are a 30 s lease and a 10 s sweep; the workers of these tests run with a 10 s lease and a
3 s sweep, the same rule in a third of the time (a heartbeat every lease / 3 either way)."""
from __future__ import annotations

import asyncio
import signal
import time

import pytest
import websockets

from sessions.models import ApiCall, CompressionEvent, Message, Turn
from sessions.services import compaction, sweep
from sessions.services.context import message_append, session_active
from sessions.services.turns import turn_submit
from tests.integration.helpers import make_conversation, receive_until, session_cookie, sim_control, wait_for, wait_turn

pytestmark = pytest.mark.integration

LEASE = 10
SWEEP = 3
LEASES = {"HERMES_TURN_LOCK_TTL": str(LEASE), "HERMES_COMPRESSION_LOCK_TTL": str(LEASE),
          "HERMES_SWEEP_INTERVAL": str(SWEEP)}
# One lease after the worker's last heartbeat, plus one sweep interval, plus a margin.
CLOSED_WITHIN = LEASE + SWEEP + 7.0


@pytest.fixture
def leases(live, settings):
    """The stack's worker replaced by one with LEASE-second leases (this process's requests use them too);
    afterwards the stack is left as the other tests expect it, whatever the test killed."""
    sim_control(live, "/_sim/faults", {"clear": True})
    settings.HERMES_COMPRESSION_LOCK_TTL = LEASE
    settings.HERMES_TURN_LOCK_TTL = LEASE
    live.kill("worker")
    live.start_worker(extra_env=LEASES)
    yield live
    sim_control(live, "/_sim/faults", {"clear": True})
    if live.procs.get("redis") is None or live.procs["redis"].poll() is not None:
        live.procs.pop("redis", None)
        live.start_redis()
    for name in [n for n in live.procs if n.startswith("worker")]:
        live.kill(name)
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


def in_thread(fn, *args, **kwargs):
    """Run blocking test code (a process start, a service call) off the event loop."""
    from django.db import connection

    def call():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    return asyncio.to_thread(call)


def restart_killed_worker(live) -> None:
    """SIGKILL the worker and start a new one at once, as `make run`'s supervisor does."""
    live.kill("worker", signal.SIGKILL)
    live.start_worker(extra_env=LEASES)


async def receive_all(ws, needles: list[str], timeout: float) -> list[str]:
    """Messages until every needle has been seen (in any of them)."""
    seen: list[str] = []
    async with asyncio.timeout(timeout):
        while not all(any(n in m for m in seen) for n in needles):
            seen.append(await ws.recv())
    return seen


def test_a_turn_whose_worker_is_killed_mid_stream_is_closed_as_interrupted_and_the_page_shows_it(leases, alice):
    live = leases
    conversation = make_conversation(alice)
    # The reply streams for about a minute: the worker is killed in the middle of it.
    sim_control(live, "/_sim/faults", {"fault": "slow=2", "count": 1})

    url, headers = socket_url(live, conversation), socket_headers(live, alice)


    async def scenario():
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')
            turn = await in_thread(submit, alice, conversation.id, "reply with 240 words about leases")
            await receive_until(ws, "stream-", timeout=30)
            assert await in_thread(lambda: Turn.objects.get(id=turn.id).status) == "running"
            killed = time.monotonic()
            await in_thread(restart_killed_worker, live)
            # Nobody sends anything: the sweep of the new worker closes the turn and tells the page.
            seen = await receive_all(ws, ['data-status="failed"', "interrupted"], timeout=CLOSED_WITHIN + 15)
            return turn, time.monotonic() - killed, seen

    turn, closed_after, seen = asyncio.run(scenario())
    turn.refresh_from_db()
    assert turn.status == "failed" and turn.error == sweep.INTERRUPTED_TURN
    assert closed_after < CLOSED_WITHIN, f"closed {closed_after:.1f} s after the kill"
    assert "The agent is working" not in seen[-1]
    # The conversation is not stuck: the next message is answered.
    last = wait_turn(submit(alice, conversation.id, "reply with 5 words about recovery"), timeout=60)
    assert last.status == "done", last.error
    print(f"\nworker SIGKILLed mid-stream: the turn closed as interrupted on the page {closed_after:.1f} s later")


def test_a_compression_whose_worker_is_killed_mid_summary_is_closed_and_nothing_changes(leases, alice):
    live = leases
    conversation = make_conversation(alice)
    session = session_active(conversation)
    for i in range(10):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 300)
    before = list(Message.objects.filter(session=session).values_list("id", "archived", "seq"))
    sim_control(live, "/_sim/faults", {"fault": "slow=30", "count": 1})  # the summary call hangs

    url, headers = socket_url(live, conversation), socket_headers(live, alice)


    async def scenario():
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')
            requested = await in_thread(compaction.compression_request, conversation_id=conversation.id,
                                        trigger="manual", force=True)
            event = requested.event
            await in_thread(wait_for, lambda: CompressionEvent.objects.filter(id=event.id, phase="summarising").exists(),
                            30, what="the summariser call to start")
            killed = time.monotonic()
            await in_thread(restart_killed_worker, live)
            seen = await receive_all(ws, [compaction.INTERRUPTED], timeout=CLOSED_WITHIN + 15)
            return event, time.monotonic() - killed, seen

    event, closed_after, seen = asyncio.run(scenario())
    event.refresh_from_db()
    assert (event.status, event.reason) == ("failed", compaction.INTERRUPTED)
    assert closed_after < CLOSED_WITHIN, f"closed {closed_after:.1f} s after the kill"
    assert any('data-status="failed"' in m and f'id="event-{event.id}"' in m for m in seen)
    session.refresh_from_db()
    assert session.ended_at is None
    assert list(Message.objects.filter(session=session).values_list("id", "archived", "seq")) == before
    # The lease is free again: the next /compress runs.
    sim_control(live, "/_sim/faults", {"clear": True})
    again = compaction.compression_request(conversation_id=conversation.id, trigger="manual", force=True).event
    assert again.status == "queued"
    wait_for(lambda: CompressionEvent.objects.get(id=again.id).status not in ("queued", "running"), 60,
             what="the next compression")
    assert CompressionEvent.objects.get(id=again.id).status == "compressed"
    print(f"\nworker SIGKILLed mid-summary: the event closed as interrupted on the page {closed_after:.1f} s later")


def test_a_streamed_call_longer_than_the_lease_keeps_it(live, alice):
    """A 4 s turn lease and a reply streaming for about 12 s on a worker that sweeps every 3 s:
    the heartbeat refreshes the lease during the call, so the sweep never takes the turn for dead."""
    sim_control(live, "/_sim/faults", {"clear": True})
    live.kill("worker")
    live.start_worker(extra_env={"HERMES_TURN_LOCK_TTL": "4", "HERMES_SWEEP_INTERVAL": str(SWEEP)})
    try:
        conversation = make_conversation(alice)
        sim_control(live, "/_sim/faults", {"fault": "slow=0.5", "count": 1})

        url, headers = socket_url(live, conversation), socket_headers(live, alice)


        async def scenario():
            async with websockets.connect(url, additional_headers=headers) as ws:
                await receive_until(ws, 'id="gauge"')
                started = time.monotonic()
                await in_thread(submit, alice, conversation.id, "reply with 240 words about heartbeats")
                seen = await receive_all(ws, ['data-status="done"'], timeout=120)
                return seen, time.monotonic() - started

        seen, took = asyncio.run(scenario())
        turn = Turn.objects.filter(conversation=conversation).latest("id")
        assert took > 4 + SWEEP, f"the reply took only {took:.1f} s: not longer than a lease and a sweep"
        assert turn.status == "done" and turn.error == ""
        assert not any('data-status="failed"' in m or "interrupted" in m for m in seen)
    finally:
        sim_control(live, "/_sim/faults", {"clear": True})
        live.kill("worker")
        live.start_worker()


def test_a_turn_sent_while_redis_was_down_runs_once_redis_is_back(leases, alice):
    live = leases
    conversation = make_conversation(alice)
    live.kill("redis", signal.SIGKILL)
    try:
        submit(alice, conversation.id, "reply with 5 words about outages")
    except Exception:  # the send during the outage is answered with a notice, or fails: the row is what counts
        pass
    turn = Turn.objects.filter(conversation=conversation).latest("id")
    assert turn.status == "queued"
    time.sleep(2)
    live.start_redis()
    back = time.monotonic()

    url, headers = socket_url(live, conversation), socket_headers(live, alice)


    async def page() -> list[str]:
        async with websockets.connect(url, additional_headers=headers) as ws:
            await receive_until(ws, 'id="gauge"')
            return await receive_all(ws, ['data-status="done"', 'data-role="assistant"'], timeout=60)

    seen = asyncio.run(page())
    ran_after = time.monotonic() - back
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    assert any("You said" in m for m in seen)
    print(f"\na turn stored while Redis was down ran {ran_after:.1f} s after Redis listened again")


def test_two_workers_sweeping_at_once_close_and_run_each_stale_turn_once(leases, alice):
    """Five conversations, each with a turn left running by a dead worker (its lease expired) and a
    message queued behind it whose task was lost: two workers sweep at the same time; every running
    turn is failed once and every queued turn answered once."""
    from datetime import timedelta

    from django.utils import timezone

    from sessions.models import ConversationLock

    live = leases
    offsets = {name: len(live.log(name)) for name in ("worker", "worker-b")}
    live.start_worker(name="worker-b", extra_env=LEASES)
    conversations = [make_conversation(alice) for _ in range(5)]
    long_ago = timezone.now() - timedelta(seconds=120)
    stale, queued = [], []
    for c in conversations:
        # The rows as a worker killed mid-turn and a send whose task was lost leave them.
        stale.append(Turn.objects.create(conversation=c, status="running", created_at=long_ago, started_at=long_ago))
        ConversationLock.objects.create(conversation=c, kind="turn", holder="a-worker-that-died",
                                        expires_at=timezone.now() - timedelta(seconds=1))
        message = message_append(session=session_active(c), role="user", content="reply with 4 words about sweeping")
        queued.append(Turn.objects.create(conversation=c, user_message=message, status="queued", created_at=long_ago))

    for turn in queued:
        wait_turn(turn, timeout=90)
    for turn in stale:
        turn.refresh_from_db()
        assert turn.status == "failed" and turn.error == sweep.INTERRUPTED_TURN
    for turn, c in zip(queued, conversations):
        assert turn.status == "done", turn.error
        assert ApiCall.objects.filter(conversation=c, purpose="agent").count() == 1  # answered once
    logs = "".join(live.log(name)[offset:] for name, offset in offsets.items())
    for turn in stale:
        assert logs.count(f"turn {turn.id} of conversation {turn.conversation_id} was interrupted") == 1, logs[-3000:]
