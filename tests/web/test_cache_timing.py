"""Cache-aware compaction timing through the real agent loop (the simulator over HTTP, Celery
eager), on an injected product clock: a return after the cache expired compacts before the turn,
with its reason in the event (with the default rule only when a turn's growth would reach the
threshold); a warm return does not; a warm conversation near its threshold is
reported deferred once; the setting off changes nothing."""
from __future__ import annotations

import pytest
from django.urls import reverse

from compression import settings_store
from sessions.agent.cache_timing import timing_facts
from sessions.agent.context_checks import request_context
from sessions.models import CompressionEvent, Conversation
from sessions.services import clock, runtime
from sessions.services.context import message_append, session_active, session_start
from sessions.services.turns import turn_submit


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(autouse=True)
def _wiring(eager_simulator):
    """The shared simulator, Celery eager (tests/web/conftest.py)."""


@pytest.fixture
def now():
    fake = FakeClock()
    with clock.injected(fake):
        yield fake


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def timing(**values) -> None:
    settings_store.save_group("compression", {"idle_compaction": True, **values})


def facts(conversation):
    cfg = runtime.current_config()
    return timing_facts(conversation, cfg, request_context(conversation, cfg))


def fill_to(conversation, share: float) -> None:
    """Plain exchanges until the projected next request is at ``share`` of the threshold."""
    session = session_active(conversation)
    i = 0
    while (f := facts(conversation)).projected < share * f.threshold:
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 300)
        i += 1


def send(user, conversation, text, capture):
    with capture(execute=True):
        turn, _ = turn_submit(user=user, conversation_id=conversation.id, text=text)
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    return turn


def idle_events(conversation):
    return list(CompressionEvent.objects.filter(conversation=conversation, trigger="idle").order_by("id"))


@pytest.mark.django_db
@pytest.mark.parametrize(("strategy", "warm", "cold", "said"), [
    ("system_and_3", 4 * 60, 6 * 60, "after 6 minutes: the cache had expired (5m entries)"),
    ("rolling_1h", 50 * 60, 74 * 60, "after 74 minutes: the cache had expired (1h entries)"),
])
def test_a_return_after_the_cache_expired_compacts_before_the_turn(alice, client, conversation, now, strategy, warm,
                                                                   cold, said, django_capture_on_commit_callbacks):
    client.force_login(alice)
    settings_store.save_group("caching", {"strategy": strategy, "cache_ttl": "5m"})
    timing(idle_compaction_when="at_share")
    fill_to(conversation, 0.75)
    send(alice, conversation, "hello there", django_capture_on_commit_callbacks)
    assert facts(conversation).last_call_at == now.t
    now.t += warm  # inside the longest entry's life: the cache is warm
    send(alice, conversation, "and one more thing", django_capture_on_commit_callbacks)
    assert idle_events(conversation) == []

    now.t += cold
    send(alice, conversation, "I am back", django_capture_on_commit_callbacks)
    [event] = idle_events(conversation)
    assert event.status == "compressed"
    assert event.reason.startswith(f"compacted on return {said}")
    # The feed says why.
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert f'<div class="muted timing-reason">compacted on return {said}' in page
    assert event.tokens_after < event.tokens_before
    # The turn ran on the compacted context; its call refreshed the (new) session's cache time.
    assert facts(conversation).last_call_at == now.t


@pytest.mark.django_db
def test_with_the_setting_off_a_long_break_changes_nothing(alice, conversation, now,
                                                           django_capture_on_commit_callbacks):
    settings_store.save_group("compression", {"idle_compaction": False})
    fill_to(conversation, 0.75)
    send(alice, conversation, "hello there", django_capture_on_commit_callbacks)
    now.t += 3 * 3600
    send(alice, conversation, "I am back", django_capture_on_commit_callbacks)
    assert not CompressionEvent.objects.filter(conversation=conversation).exists()


@pytest.mark.django_db
def test_below_the_idle_share_a_long_break_changes_nothing(alice, conversation, now,
                                                           django_capture_on_commit_callbacks):
    timing(idle_compaction_share=0.9)
    fill_to(conversation, 0.5)
    send(alice, conversation, "hello there", django_capture_on_commit_callbacks)
    now.t += 3 * 3600
    send(alice, conversation, "I am back", django_capture_on_commit_callbacks)
    assert idle_events(conversation) == []


@pytest.mark.django_db
def test_a_warm_conversation_near_its_threshold_is_reported_deferred_once(alice, client, conversation, now,
                                                                          django_capture_on_commit_callbacks):
    timing(idle_compaction_share=0.5, defer_horizon_turns=20)
    fill_to(conversation, 0.8)
    long = "Here is more context for you to keep in mind. " * 60
    for _ in range(3):
        now.t += 30
        send(alice, conversation, long, django_capture_on_commit_callbacks)
    events = idle_events(conversation)
    assert [e.status for e in events] == ["deferred"]
    assert "compaction deferred while the cache is warm (last call 30 seconds ago)" in events[0].reason
    assert "it runs at the next break or at the threshold" in events[0].reason
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert 'data-status="deferred" data-trigger="idle"' in page and "compaction deferred while" in page
    assert not CompressionEvent.objects.filter(conversation=conversation, status="compressed").exists()


def fill_until_room(conversation, room: float) -> None:
    """Small exchanges until at most ``room`` tokens are left before the threshold."""
    session = session_active(conversation)
    i = 0
    while (f := facts(conversation)).threshold - f.projected > room:
        message_append(session=session, role="user", content=f"Note {i}: " + "fact " * 40)
        message_append(session=session, role="assistant", content=f"Noted {i}.")
        i += 1


def compacted(conversation):
    return [e for e in idle_events(conversation) if e.status == "compressed"]


@pytest.mark.django_db
def test_by_default_a_cold_return_compacts_only_when_this_turn_would_reach_the_threshold(
        alice, conversation, now, django_capture_on_commit_callbacks):
    timing()  # the default rule: due_this_turn
    assert runtime.current_config().compression.idle_compaction_when == "due_this_turn"
    (conversation.workspace / "notes.txt").parent.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text("The staging host answers on port 8443. " * 80)
    fill_to(conversation, 0.70)
    # Plain replies (one call a turn): nothing grows within a turn, so not even a break just
    # under the threshold compacts early; the next turn starts and ends below it.
    for text in ("hello there", "and one more thing", "and another"):
        now.t += 30
        send(alice, conversation, text, django_capture_on_commit_callbacks)
    assert facts(conversation).growth_within_turn == 0.0
    fill_until_room(conversation, 600)
    now.t += 3 * 3600
    send(alice, conversation, "I am back", django_capture_on_commit_callbacks)
    assert not CompressionEvent.objects.filter(conversation=conversation, status="compressed").exists()

    # Turns that read a file: the tool result grows the request within the turn.
    for _ in range(2):
        now.t += 30
        send(alice, conversation, "read notes.txt", django_capture_on_commit_callbacks)
    within = facts(conversation).growth_within_turn
    assert within is not None and within > 200
    # More than that left before the threshold: a long break compacts nothing.
    assert facts(conversation).threshold - facts(conversation).projected > within
    now.t += 3 * 3600
    send(alice, conversation, "I am back", django_capture_on_commit_callbacks)
    assert compacted(conversation) == []

    # Less than that left: the next long break compacts before the turn.
    fill_until_room(conversation, facts(conversation).growth_within_turn * 0.8)
    now.t += 3 * 3600
    send(alice, conversation, "I am back again", django_capture_on_commit_callbacks)
    [event] = compacted(conversation)
    assert event.reason.startswith("compacted on return after 3.0 hours: the cache had expired")
    assert event.reason.endswith("of the threshold, due this turn")
    assert event.tokens_after < event.tokens_before

