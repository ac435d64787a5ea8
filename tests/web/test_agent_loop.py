"""The agent loop and the compaction service against the real simulator over HTTP (in-process
server), with Celery eager and the in-memory channel layer: the fast tier of SPEC §5 and §7."""
from __future__ import annotations

import pytest

from compression import settings_store
from sessions.agent.loop import turn_drain
from sessions.models import ApiCall, CompressionEvent, Conversation, Message, Turn
from sessions.services.compaction import compression_inline
from sessions.services.context import context_messages, message_append, session_active, session_start
from sessions.services.turns import TurnRejected, turn_submit
from simulator import parse_fault


@pytest.fixture(autouse=True)
def _wiring(eager_simulator):
    """Every test here talks to the shared simulator (tests/web/conftest.py)."""


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def fill_history(conversation, pairs: int, size: int = 400) -> None:
    """Plain user/assistant exchanges, so there is a middle to summarise."""
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * size)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * size)


def submit(user, conversation, text, capture):
    with capture(execute=True):
        turn, _ = turn_submit(user=user, conversation_id=conversation.id, text=text)
    turn.refresh_from_db()
    return turn


@pytest.mark.django_db
def test_it_runs_a_turn_that_calls_a_tool(alice, conversation, django_capture_on_commit_callbacks):
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text("the launch code is 4417\n")
    turn = submit(alice, conversation, "read notes.txt", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    roles = [m.role for m in Message.objects.filter(conversation=conversation).order_by("id")]
    assert roles == ["user", "assistant", "tool", "assistant"]
    tool = Message.objects.get(conversation=conversation, role="tool")
    assert "4417" in tool.content
    assert tool.token_count > 0
    calls = ApiCall.objects.filter(conversation=conversation, purpose="agent")
    assert calls.count() == 2
    assert all(c.prompt_tokens > 0 and c.error == "" for c in calls)
    session = session_active(conversation)
    assert session.last_prompt_tokens == calls.last().prompt_tokens


@pytest.mark.django_db
def test_it_rejects_an_oversized_message_and_stores_nothing(alice, conversation, settings):
    settings.HERMES_MAX_MESSAGE_CHARS = 1000
    with pytest.raises(TurnRejected, match="too long: 1,001 characters"):
        turn_submit(user=alice, conversation_id=conversation.id, text="x" * 1001)
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not Turn.objects.exists()


@pytest.mark.django_db
def test_it_refuses_another_users_conversation(bob, conversation):
    with pytest.raises(TurnRejected):
        turn_submit(user=bob, conversation_id=conversation.id, text="hello")
    assert not Message.objects.filter(conversation=conversation).exists()


@pytest.mark.django_db
def test_it_compresses_and_retries_after_an_overflow(alice, conversation, sim, django_capture_on_commit_callbacks):
    fill_history(conversation, 20)
    sim.sim.faults.push(parse_fault("overflow"), 1)
    turn = submit(alice, conversation, "hello again", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    event = CompressionEvent.objects.get(conversation=conversation)
    assert (event.trigger, event.status) == ("error_recovery", "compressed")
    assert event.tokens_after < event.tokens_before
    # Rotation: a child session holds the compressed context; every original is kept.
    new = session_active(conversation)
    assert new.parent_id == event.session_id
    assert Message.objects.filter(session=event.session).count() == 41
    assert sum(1 for m in context_messages(new) if m.get("_compressed_summary")) == 1


@pytest.mark.django_db
def test_it_gives_up_after_the_maximum_compression_attempts(alice, conversation, sim, django_capture_on_commit_callbacks):
    from simulator import parse_fault

    # Each overflow names a smaller window (as a provider whose real window is below the catalogue's
    # would), so each compaction has a smaller tail and makes progress: the cap is what stops it.
    conversation.model = "sim-claude-1m"
    conversation.save()
    settings_store.save_group("compression", {"protect_last_n": 2})
    fill_history(conversation, 60)
    for window in (400_000, 250_000, 150_000, 90_000):  # summaries pass; chat requests overflow
        sim.sim.faults.push(parse_fault(f"overflow_turn={window}"), 1)
    turn = submit(alice, conversation, "one more", django_capture_on_commit_callbacks)
    assert turn.status == "failed"
    assert "/compress" in turn.error and "new conversation" in turn.error
    assert "still does not fit after 3 compressions" in turn.error
    recoveries = CompressionEvent.objects.filter(conversation=conversation, trigger="error_recovery")
    assert [e.status for e in recoveries.order_by("id")] == ["compressed"] * 3


@pytest.mark.django_db
def test_it_fails_without_compressing_when_compression_is_disabled(alice, conversation, sim, django_capture_on_commit_callbacks):
    from simulator import parse_fault

    settings_store.save_group("compression", {"enabled": False})
    fill_history(conversation, 20)
    sim.sim.faults.push(parse_fault("413"), 1)
    turn = submit(alice, conversation, "hello", django_capture_on_commit_callbacks)
    assert turn.status == "failed"
    # A user who is not staff reads what they can do, not that an administrator switched something off.
    assert "/new" in turn.error and "ompression" not in turn.error
    assert not CompressionEvent.objects.filter(conversation=conversation).exists()


@pytest.mark.django_db
def test_gateway_hygiene_compacts_in_place_before_the_turn(alice, conversation, django_capture_on_commit_callbacks):
    fill_history(conversation, 10)
    session = session_active(conversation)
    session.last_prompt_tokens = int(64_000 * 0.86)
    session.save()
    turn = submit(alice, conversation, "continue", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    event = CompressionEvent.objects.filter(conversation=conversation, trigger="hygiene").get()
    assert event.status == "compressed" and event.in_place
    assert session_active(conversation).id == session.id  # in place: no rotation
    assert Message.objects.filter(session=session, archived=True).count() >= 20


@pytest.mark.django_db
def test_gateway_hygiene_fires_at_the_hard_message_limit(alice, conversation, django_capture_on_commit_callbacks):
    settings_store.save_group("compression", {"hygiene_hard_message_limit": 8})
    fill_history(conversation, 4, size=5)
    turn = submit(alice, conversation, "continue", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    assert CompressionEvent.objects.filter(conversation=conversation, trigger="hygiene").exists()


@pytest.mark.django_db
def test_a_summary_failure_leaves_the_session_as_it_was(alice, conversation, sim):
    from simulator import parse_fault

    fill_history(conversation, 20)
    session = session_active(conversation)
    before = [(m.id, m.archived) for m in Message.objects.filter(session=session)]
    sim.sim.faults.push(parse_fault("empty_summary"), 1)
    outcome = compression_inline(conversation_id=conversation.id, trigger="preflight")
    assert outcome.event.status == "failed"
    assert "empty" in outcome.event.reason
    session.refresh_from_db()
    assert session.ended_at is None and session.cooldown_until is not None
    assert [(m.id, m.archived) for m in Message.objects.filter(session=session)] == before
    # An automatic compression waits for the cooldown; a manual one does not.
    assert compression_inline(conversation_id=conversation.id, trigger="post_response").event.reason == "cooldown"
    assert compression_inline(conversation_id=conversation.id, trigger="manual", force=True).event.status == "compressed"


@pytest.mark.django_db
def test_manual_compression_with_a_topic_reaches_the_summary(alice, conversation):
    fill_history(conversation, 12)
    outcome = compression_inline(conversation_id=conversation.id, trigger="manual", focus_topic="auth flow", force=True)
    assert outcome.event.status == "compressed"
    assert outcome.event.focus_topic == "auth flow"
    assert "auth flow" in outcome.event.summary.lower()


@pytest.mark.django_db
def test_a_second_compression_is_skipped_while_one_holds_the_lock(alice, conversation):
    from sessions.services.locks import lock_acquire

    fill_history(conversation, 12)
    assert lock_acquire(conversation_id=conversation.id, kind="compression", ttl=60)
    outcome = compression_inline(conversation_id=conversation.id, trigger="manual", force=True)
    assert (outcome.event.status, outcome.event.reason) == ("skipped", "already compressing")


@pytest.mark.django_db
def test_turns_run_one_at_a_time_in_order(alice, conversation, django_capture_on_commit_callbacks):
    from hermes_web.celery import app

    app.conf.task_always_eager = False  # queue both, then drain as a worker would
    try:
        with django_capture_on_commit_callbacks(execute=False):
            first, _ = turn_submit(user=alice, conversation_id=conversation.id, text="first question")
            second, _ = turn_submit(user=alice, conversation_id=conversation.id, text="second question")
    finally:
        app.conf.task_always_eager = True
    assert turn_drain(conversation_id=conversation.id) is True
    first.refresh_from_db(), second.refresh_from_db()
    assert first.status == second.status == "done"
    assert first.finished_at <= second.started_at
    users = [m.content for m in Message.objects.filter(conversation=conversation, role="user").order_by("id")]
    assert users == ["first question", "second question"]


@pytest.mark.django_db
def test_a_small_auxiliary_window_lowers_the_threshold_and_says_so(client, alice):
    from sessions.presenters import gauge

    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session_start(conversation=conversation)
    assert gauge(conversation)["lowered_to_aux"] is None
    settings_store.save_group("auxiliary", {"provider": "simulator", "model": "sim-claude-64k"})
    g = gauge(conversation)
    assert g["threshold"] == g["lowered_to_aux"] == 64_000
    client.force_login(alice)
    assert "auxiliary summariser" in client.get(f"/conversations/{conversation.id}/").content.decode()


@pytest.mark.django_db
def test_an_unusable_auxiliary_route_falls_back_to_the_main_model_and_tells_staff(alice, conversation, admin_client):
    settings_store.save_group("auxiliary", {"provider": "custom", "base_url": ""})
    fill_history(conversation, 12)
    outcome = compression_inline(conversation_id=conversation.id, trigger="preflight")
    assert outcome.event.status == "compressed"
    assert "no auxiliary model" in outcome.event.aux_failure
    assert ApiCall.objects.filter(conversation=conversation, purpose="compression", error="",
                                  model=conversation.model).exists()
    dashboard = admin_client.get("/staff/").content.decode()
    assert "auxiliary summariser failed" in dashboard and "no auxiliary model" in dashboard


@pytest.mark.django_db
def test_when_the_main_model_fails_too_it_aborts_and_waits_as_for_its_error(alice, conversation, sim):
    settings_store.save_group("auxiliary", {"provider": "custom", "base_url": ""})
    fill_history(conversation, 12)
    sim.sim.faults.push(parse_fault("500"), 10)
    outcome = compression_inline(conversation_id=conversation.id, trigger="preflight")
    assert outcome.event.status == "failed" and outcome.event.reason.startswith("summary failed")
    assert "no auxiliary model" in outcome.event.aux_failure
    session = session_active(conversation)
    import time as _time

    # The stand-in's error was transient (a 500): the short cooldown, then the main model again.
    assert 0 < session.cooldown_until - _time.time() <= 60


@pytest.mark.django_db
def test_a_summariser_timeout_aborts_and_leaves_the_session_unchanged(alice, conversation, sim):
    import time as _time

    from simulator import parse_fault

    settings_store.save_group("auxiliary", {"timeout": 5})
    fill_history(conversation, 12)
    session = session_active(conversation)
    before = list(Message.objects.filter(session=session).values_list("id", "archived"))
    sim.sim.faults.push(parse_fault("slow=7"), 3)  # every attempt, the SDK's retries included
    outcome = compression_inline(conversation_id=conversation.id, trigger="preflight")
    assert outcome.event.status == "failed"
    assert "timed out" in outcome.event.reason.lower() or "timeout" in outcome.event.reason.lower()
    session.refresh_from_db()
    assert session.ended_at is None
    assert list(Message.objects.filter(session=session).values_list("id", "archived")) == before
    assert 0 < session.cooldown_until - _time.time() <= 60  # a transient failure: the short cooldown


@pytest.mark.django_db
def test_the_event_records_what_the_summariser_read_and_cost(alice, conversation):
    fill_history(conversation, 12)
    outcome = compression_inline(conversation_id=conversation.id, trigger="manual", force=True)
    event = outcome.event
    assert event.status == "compressed"
    assert event.messages_read == event.summarized_count > 0 and event.tokens_read > 0
    assert event.summariser_calls >= 1
    calls = ApiCall.objects.filter(conversation=conversation, purpose="compression")
    assert calls.count() == event.summariser_calls
    assert event.cost == sum(c.cost for c in calls) > 0


@pytest.mark.django_db
def test_a_window_lowered_by_an_overflow_survives_the_rotation(alice, conversation, sim,
                                                               django_capture_on_commit_callbacks):
    conversation.model = "sim-claude-1m"  # far from its own thresholds: only the overflow compresses
    conversation.save()
    fill_history(conversation, 100)  # ~80K tokens: over the 70K the provider will claim
    sim.sim.faults.push(parse_fault("overflow=70000"), 1)
    turn = submit(alice, conversation, "hello again", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    event = CompressionEvent.objects.get(conversation=conversation, trigger="error_recovery")
    assert event.status == "compressed", event.reason
    child = session_active(conversation)
    assert child.parent_id == event.session_id and child.context_length == 70_000


@pytest.mark.django_db
def test_the_gauge_right_after_a_compaction_shows_the_events_figure(alice, conversation):
    from sessions.presenters import gauge

    fill_history(conversation, 12)
    event = compression_inline(conversation_id=conversation.id, trigger="manual", force=True).event
    assert event.status == "compressed"
    g = gauge(conversation)
    assert (g["basis"], g["tokens"]) == ("counted", event.tokens_after)


@pytest.mark.django_db
def test_a_response_without_usage_is_judged_on_the_rough_estimate(alice, conversation, sim,
                                                                  django_capture_on_commit_callbacks):
    # Over the threshold in what will be sent next, but the provider reports no prompt tokens: the
    # post-response check must not read that as 0 (SPEC §5.3). The 200K model with threshold 0.1
    # (floored to 64,000) puts ~68K real tokens over the threshold and well under hygiene's 85 %.
    conversation.model = "sim-claude-200k"
    conversation.save()
    settings_store.save_group("compression", {"threshold": 0.1})
    fill_history(conversation, 110, size=300)
    session = session_active(conversation)
    session.engine_state = {**(session.engine_state or {}), "awaiting_real_usage": True}
    session.save(update_fields=["engine_state"])  # the preflight defers to real usage
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text("a note\n")
    sim.sim.faults.push(parse_fault("no_usage"), 2)
    turn = submit(alice, conversation, "read notes.txt", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    assert not CompressionEvent.objects.filter(conversation=conversation, trigger__in=("hygiene", "preflight")).exists()
    assert CompressionEvent.objects.filter(conversation=conversation, trigger="post_response").exists()


@pytest.mark.django_db
def test_each_reply_replaces_the_streaming_placeholder_of_its_own_call(alice, conversation, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    from sessions import live

    started, replaced = [], []
    real_started, real_added = live.stream_started, live.message_added
    monkeypatch.setattr(live, "stream_started", lambda cid, sid: (started.append(sid), real_started(cid, sid)))
    monkeypatch.setattr(live, "message_added", lambda message, *, stream_id=None: (
        replaced.append((message.role, stream_id)), real_added(message, stream_id=stream_id)))
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text("the launch code is 4417\n")
    turn = submit(alice, conversation, "read notes.txt", django_capture_on_commit_callbacks)
    assert turn.status == "done", turn.error
    ids = [f"stream-{turn.id}-0", f"stream-{turn.id}-1"]  # one placeholder per model call, in order
    assert started == ids
    assert [sid for role, sid in replaced if role == "assistant"] == ids
