"""The stale-work sweep on the fast tier: turns and compression events left behind by a worker
that stopped (an expired lease) are closed or run again and the page is told; work whose lease is
live, or too young, is left alone; nothing is enqueued while the broker is away. Tasks run eagerly
against the in-process simulator; pushes go through the in-memory channel layer. The broker
commands the sweep sends (PING, SET NX EX, DEL) go to a dict-backed stand-in here; the
integration tier runs the same sweep against real Redis (tests/integration/test_faults_stale.py)."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions.models import CompressionEvent, Conversation, ConversationLock, Message, Turn
from sessions.services import compaction, locks, sweep
from sessions.services.context import message_append, session_active, session_start
from tests.web.pushes import Page


class Broker:
    """The three Redis commands the sweep sends, on a dict; `up=False` is a broker that is away."""

    def __init__(self, up: bool = True) -> None:
        self.up = up
        self.keys: dict[str, str] = {}

    def _check(self) -> None:
        if not self.up:
            raise ConnectionError("Error 111 connecting to 127.0.0.1:6390. Connection refused.")

    def ping(self) -> bool:
        self._check()
        return True

    def set(self, key, value, nx=False, ex=None):
        self._check()
        if nx and key in self.keys:
            return None
        self.keys[key] = value
        return True

    def delete(self, key) -> int:
        self._check()
        return int(self.keys.pop(key, None) is not None)


@pytest.fixture(autouse=True)
def _wiring(eager_simulator, settings):
    """The shared simulator (tests/web/conftest.py), and the 30 s leases the sweep is built for."""
    settings.HERMES_TURN_LOCK_TTL = 30
    settings.HERMES_COMPRESSION_LOCK_TTL = 30


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def fill_history(conversation, pairs: int, size: int = 400) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * size)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * size)


def expired_lease(conversation, kind: str) -> None:
    """The lease of a holder that died: it stopped refreshing, and it ran out a moment ago."""
    ConversationLock.objects.create(conversation=conversation, kind=kind, holder="a-worker-that-died",
                                    expires_at=timezone.now() - timedelta(seconds=1))


def old_turn(conversation, status: str, *, age: float = 60.0, text: str = "hello there") -> Turn:
    message = message_append(session=session_active(conversation), role="user", content=text)
    created = timezone.now() - timedelta(seconds=age)
    return Turn.objects.create(conversation=conversation, user_message=message, status=status, created_at=created,
                               started_at=created if status == "running" else None)


def lease_rows(conversation) -> list[tuple[str, str]]:
    return list(ConversationLock.objects.filter(conversation=conversation).values_list("kind", "holder"))


# ------------------------------------------------------------------------------------ turns

@pytest.mark.django_db
def test_a_running_turn_whose_lease_expired_is_failed_as_interrupted_and_the_page_is_told(conversation):
    turn = old_turn(conversation, "running")
    expired_lease(conversation, locks.TURN_LOCK)
    page = Page(conversation)

    report = sweep.sweep_once(redis=Broker())

    turn.refresh_from_db()
    assert turn.status == "failed" and turn.error == sweep.INTERRUPTED_TURN and turn.finished_at is not None
    assert report.turns_failed == [turn.id]
    pushed = page.received()
    assert any(e["kind"] == "error" and "interrupted" in e["html"] for e in pushed), pushed
    assert any(e["kind"] == "turn_status" and 'data-status="failed"' in e["html"] for e in pushed), pushed
    assert lease_rows(conversation) == []  # the sweep's own lease is released


@pytest.mark.django_db
def test_a_running_turn_whose_worker_refreshes_its_lease_is_left_alone(conversation):
    turn = old_turn(conversation, "running")
    assert locks.lock_acquire(conversation_id=conversation.id, kind=locks.TURN_LOCK, ttl=30, holder="alive")

    report = sweep.sweep_once(redis=Broker())

    turn.refresh_from_db()
    assert turn.status == "running" and not report
    assert lease_rows(conversation) == [("turn", "alive")]


@pytest.mark.django_db
def test_an_interrupted_turn_answers_its_open_tool_calls_so_the_next_request_is_valid(conversation):
    turn = old_turn(conversation, "running", text="read notes.txt")
    session = session_active(conversation)
    call = {"id": "toolu_01", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}}
    message_append(session=session, role="assistant", content="", tool_calls=[call])

    sweep.sweep_once(redis=Broker())

    turn.refresh_from_db()
    assert turn.status == "failed"
    answer = Message.objects.get(session=session, role="tool", tool_call_id="toolu_01")
    assert answer.content.startswith("Not run")


@pytest.mark.django_db
def test_a_queued_turn_whose_task_was_lost_runs(conversation):
    turn = old_turn(conversation, "queued", text="reply with 5 words about recovery")
    broker = Broker()

    report = sweep.sweep_once(redis=broker)

    turn.refresh_from_db()
    assert report.turns_requeued == [turn.id]
    assert turn.status == "done", turn.error
    assert Message.objects.filter(session=session_active(conversation), role="assistant").exists()
    assert f"{sweep.DISPATCH_KEY}{turn.id}" in broker.keys


@pytest.mark.django_db
def test_a_turn_enqueued_again_moments_ago_by_another_worker_is_not_enqueued_twice(conversation):
    turn = old_turn(conversation, "queued")
    broker = Broker()
    broker.keys[f"{sweep.DISPATCH_KEY}{turn.id}"] = "1"  # another worker's sweep enqueued it

    report = sweep.sweep_once(redis=broker)

    turn.refresh_from_db()
    assert turn.status == "queued" and report.turns_requeued == []


@pytest.mark.django_db
def test_a_young_queued_turn_and_one_behind_a_live_lease_are_left_alone(conversation, alice):
    young = old_turn(conversation, "queued", age=1.0)
    other = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=other)
    waiting = old_turn(other, "queued")
    # A hygiene compression goes first: its lease is live, the turn follows it.
    assert locks.lock_acquire(conversation_id=other.id, kind=locks.COMPRESSION_LOCK, ttl=30, holder="hygiene")

    report = sweep.sweep_once(redis=Broker())

    young.refresh_from_db()
    waiting.refresh_from_db()
    assert (young.status, waiting.status) == ("queued", "queued") and not report


@pytest.mark.django_db
def test_nothing_is_enqueued_while_the_broker_is_away_yet_interrupted_turns_still_close(conversation, alice):
    queued = old_turn(conversation, "queued")
    other = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=other)
    running = old_turn(other, "running")
    broker = Broker(up=False)

    report = sweep.sweep_once(redis=broker)

    queued.refresh_from_db()
    running.refresh_from_db()
    assert report.broker is False
    assert queued.status == "queued" and report.turns_requeued == []
    assert running.status == "failed" and report.turns_failed == [running.id]
    # The broker back: the next pass runs it.
    broker.up = True
    assert sweep.sweep_once(redis=broker).turns_requeued == [queued.id]
    queued.refresh_from_db()
    assert queued.status == "done", queued.error


# ------------------------------------------------------------------------------ compressions

def compression_event(conversation, status: str) -> CompressionEvent:
    return CompressionEvent.objects.create(conversation=conversation, session=session_active(conversation),
                                           trigger="manual", status=status,
                                           phase="summarising" if status == "running" else "queued")


@pytest.mark.django_db
def test_a_running_compression_whose_lease_expired_is_closed_and_changes_nothing(conversation):
    fill_history(conversation, 8)
    session = session_active(conversation)
    before = list(Message.objects.filter(session=session).values_list("id", "archived", "seq"))
    event = compression_event(conversation, "running")
    expired_lease(conversation, locks.COMPRESSION_LOCK)
    page = Page(conversation)

    report = sweep.sweep_once(redis=Broker())

    event.refresh_from_db()
    assert (event.status, event.reason, event.phase) == ("failed", compaction.INTERRUPTED, "done")
    assert report.compressions_closed == [event.id]
    assert list(Message.objects.filter(session=session).values_list("id", "archived", "seq")) == before
    assert session_active(conversation).id == session.id
    pushed = page.received()
    assert any(e["kind"] == "compression_result" and compaction.INTERRUPTED in e["html"] for e in pushed), pushed
    assert lease_rows(conversation) == []


@pytest.mark.django_db
def test_a_page_told_a_compression_was_interrupted_can_compress_at_once(conversation, monkeypatch):
    """The push comes after the sweep gave the lease back: a /compress sent the moment the page
    shows "interrupted" is queued, not refused as already running."""
    fill_history(conversation, 8)
    event = compression_event(conversation, "running")
    expired_lease(conversation, locks.COMPRESSION_LOCK)
    asked, pushes = [], []
    told = compaction.live.compression_finished

    def compress_when_told(closed):
        pushes.append(closed.id)
        if len(pushes) == 1:  # the first push only (a refused request is pushed too)
            asked.append(compaction.compression_request(conversation_id=conversation.id, trigger="manual",
                                                        force=True).event)
        told(closed)

    monkeypatch.setattr(compaction.live, "compression_finished", compress_when_told)
    sweep.sweep_once(redis=Broker())

    event.refresh_from_db()
    assert event.reason == compaction.INTERRUPTED
    assert [(e.status, e.reason) for e in asked] == [("queued", "")]


@pytest.mark.django_db
def test_a_queued_compression_whose_job_was_lost_runs_again(conversation):
    fill_history(conversation, 8)
    event = compression_event(conversation, "queued")
    expired_lease(conversation, locks.COMPRESSION_LOCK)

    report = sweep.sweep_once(redis=Broker())

    event.refresh_from_db()
    assert report.compressions_requeued == [event.id] and report.compressions_closed == []
    assert event.status == "compressed", event.reason
    assert session_active(conversation).parent_id is not None  # the session rotated


@pytest.mark.django_db
def test_a_queued_compression_stays_queued_while_the_broker_is_away(conversation):
    event = compression_event(conversation, "queued")
    expired_lease(conversation, locks.COMPRESSION_LOCK)

    report = sweep.sweep_once(redis=Broker(up=False))

    event.refresh_from_db()
    assert event.status == "queued" and not report
    assert lease_rows(conversation) == []  # not held on to: the next pass (or a request) takes it


@pytest.mark.django_db
def test_a_compression_whose_lease_is_live_is_left_alone(conversation):
    event = compression_event(conversation, "running")
    assert locks.lock_acquire(conversation_id=conversation.id, kind=locks.COMPRESSION_LOCK, ttl=30, holder="alive")

    assert not sweep.sweep_once(redis=Broker())
    event.refresh_from_db()
    assert event.status == "running"


# --------------------------------------------------------- the job side of a closed or re-run event

@pytest.mark.django_db
def test_a_late_copy_of_a_job_leaves_an_event_closed_by_the_sweep_as_it_is(conversation):
    fill_history(conversation, 8)
    event = compression_event(conversation, "running")
    expired_lease(conversation, locks.COMPRESSION_LOCK)
    sweep.sweep_once(redis=Broker())

    outcome = compaction.compression_job_run(event_id=event.id, holder="a-worker-that-died")

    event.refresh_from_db()
    assert (outcome.event.status, event.status, event.reason) == ("failed", "failed", compaction.INTERRUPTED)


@pytest.mark.django_db
def test_a_job_whose_lease_was_taken_over_leaves_the_event_to_the_new_holder(conversation):
    event = compression_event(conversation, "queued")
    expired_lease(conversation, locks.COMPRESSION_LOCK)
    new_holder = locks.lock_acquire(conversation_id=conversation.id, kind=locks.COMPRESSION_LOCK, ttl=30)

    compaction.compression_job_run(event_id=event.id, holder="a-worker-that-died")

    event.refresh_from_db()
    assert event.status == "queued"  # not "skipped": the job queued again under new_holder runs it
    assert lease_rows(conversation) == [("compression", new_holder)]


@pytest.mark.django_db
def test_a_compression_closes_its_event_before_it_releases_its_lease(conversation, monkeypatch):
    """A running event with no live lease is one whose worker stopped: the lease must never be
    gone while the event still says running."""
    fill_history(conversation, 8)
    seen = []
    release = compaction.lock_release

    def observing_release(*, conversation_id, kind, holder):
        if kind == locks.COMPRESSION_LOCK:
            seen.append(list(CompressionEvent.objects.filter(conversation_id=conversation_id)
                             .values_list("status", flat=True)))
        release(conversation_id=conversation_id, kind=kind, holder=holder)

    monkeypatch.setattr(compaction, "lock_release", observing_release)
    outcome = compaction.compression_inline(conversation_id=conversation.id, trigger="manual", force=True)

    assert outcome.event.status == "compressed"
    assert seen == [["compressed"]]


# ------------------------------------------------------------------------------- the heartbeat

@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_the_lease_after_a_refresh_fails(conversation, monkeypatch):
    holder = locks.lock_acquire(conversation_id=conversation.id, kind=locks.TURN_LOCK, ttl=0.6)
    first = ConversationLock.objects.get(conversation=conversation).expires_at
    calls = []
    refresh = locks.lock_refresh

    def flaky_refresh(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("database is locked")  # as SQLite says when a writer holds it too long
        return refresh(**kwargs)

    monkeypatch.setattr(locks, "lock_refresh", flaky_refresh)
    done = threading.Event()
    with locks.lease_kept(conversation_id=conversation.id, kind=locks.TURN_LOCK, holder=holder, ttl=0.6) as lease:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not done.is_set():
            if ConversationLock.objects.get(conversation=conversation).expires_at > first and len(calls) >= 2:
                done.set()
            time.sleep(0.05)
    assert done.is_set(), f"the lease was not refreshed after the failed beat ({len(calls)} beats)"
    assert not lease.lost.is_set()


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_says_when_another_holder_took_the_lease(conversation):
    holder = locks.lock_acquire(conversation_id=conversation.id, kind=locks.TURN_LOCK, ttl=0.6)
    with locks.lease_kept(conversation_id=conversation.id, kind=locks.TURN_LOCK, holder=holder, ttl=0.6) as lease:
        ConversationLock.objects.filter(conversation=conversation).update(holder="someone-else")
        assert lease.lost.wait(20)
