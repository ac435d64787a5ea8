"""The agent and the compaction service on real workers: real Redis, a Celery worker subprocess,
the simulator over HTTP and the test database shared with them (SQLite, or PostgreSQL)."""
from __future__ import annotations

import pytest

from sessions.models import ApiCall, CompressionEvent, Message, Session
from sessions.services import runtime
from sessions.services.context import context_messages, session_active
from sessions.services.turns import turn_submit
from tests.integration.helpers import make_conversation, sim_control, wait_compressions_settled, wait_turn

pytestmark = pytest.mark.integration

PASTE = "\n".join(f"E{i:04d} worker-{i % 7} failed: timeout after {i * 3} ms in step build_{i % 60}" for i in range(160))
FILE_BODY = "\n".join(f"line {i}: the build step {i} writes artifact_{i}.bin and logs status ok" for i in range(130))


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    sim_control(live, "/_sim/reset", {})


def run_turn(user, conversation, text: str, timeout: float = 60.0):
    turn, _ = turn_submit(user=user, conversation_id=conversation.id, text=text)
    return wait_turn(turn, timeout)


def replay_engine_output(event: CompressionEvent) -> list[dict]:
    """Run the engine again on the ended session's context with the state it had, and a summariser
    that returns the recorded summary: the stored child context must be exactly that output."""
    old = Session.objects.get(id=event.session_id)
    conversation = old.conversation
    cfg = runtime.current_config()
    body = event.summary

    engine = runtime.engine_build(conversation=conversation, session=old, cfg=cfg, summariser=lambda prompt, budget: body)
    return engine.compress(context_messages(old), force=True).messages


def comparable(messages: list[dict]) -> list[tuple]:
    return [(m["role"], m.get("tool_call_id", ""), bool(m.get("_compressed_summary")),
             str(m.get("content")) if not m.get("_compressed_summary") else "")
            for m in messages]


def test_a_long_tool_heavy_conversation_compresses_on_real_workers(live, alice):
    conversation = make_conversation(alice, "sim-claude-64k")
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    for i in range(60):
        (conversation.workspace / f"build_{i}.log").write_text(f"build {i}\n{FILE_BODY}\n")

    from sessions.presenters import gauge

    pasted_near_threshold = False
    for i in range(60):
        # Every third message pastes an error log as well, as people do, and so does the first one
        # sent when the context is just under the threshold: the preflight's projection counts the
        # paste, and a tool result that takes the next request over is caught after the response.
        g = gauge(conversation)
        near = g["basis"] == "real" and g["threshold"] - 3_500 <= g["tokens"] < g["threshold"]
        near, pasted_near_threshold = near and not pasted_near_threshold, pasted_near_threshold or near
        paste = f"\nThis is what I saw:\n{PASTE}" if i % 3 == 2 or near else ""
        turn = run_turn(alice, conversation, f"read build_{i}.log{paste}")
        assert turn.status == "done", (i, turn.error)
    wait_compressions_settled(conversation)

    compressed = list(CompressionEvent.objects.filter(conversation=conversation, status="compressed").order_by("id"))
    triggers = {e.trigger for e in compressed}
    assert len(compressed) >= 3, [(e.trigger, e.status, e.reason) for e in conversation.compression_events.all()]
    assert {"preflight", "post_response"} <= triggers, triggers
    for event in compressed:
        assert event.tokens_before > event.tokens_after > 0
        assert event.messages_before > event.messages_after
        assert event.summary

    # The model never received a request over its window, and no call overflowed.
    stats = sim_control(live, "/_sim/stats")
    assert stats["max_prompt_tokens"] <= 64_000
    assert not ApiCall.objects.filter(conversation=conversation).exclude(error="").exists()

    # Every original message is still in the transcript.
    visible = Message.objects.filter(conversation=conversation, visible=True, is_summary=False)
    assert visible.filter(role="user").count() == 60
    assert visible.filter(role="tool").count() == 60
    assert visible.filter(role="assistant").count() == 120

    # The context after each rotation is exactly the engine's output for the context before it.
    for event in compressed:
        if event.in_place:
            continue
        expected = replay_engine_output(event)
        child = Session.objects.get(id=event.new_session_id)
        stored = context_messages(child)[: len(expected)]
        assert comparable(stored) == comparable(expected)
        assert stored[0]["content"] == expected[0]["content"]  # the system prompt with its note


def test_an_overflow_mid_turn_compresses_and_retries(live, alice):
    conversation = make_conversation(alice)
    for i in range(12):
        run_turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 300)
    sim_control(live, "/_sim/faults", {"fault": "overflow", "count": 1})
    turn = run_turn(alice, conversation, "and now the summary question")
    assert turn.status == "done", turn.error
    event = CompressionEvent.objects.get(conversation=conversation, trigger="error_recovery")
    assert event.status == "compressed"


def test_a_413_mid_turn_compresses_and_retries_too(live, alice):
    conversation = make_conversation(alice)
    for i in range(12):
        run_turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 300)
    sim_control(live, "/_sim/faults", {"fault": "413", "count": 1})
    turn = run_turn(alice, conversation, "and the payload question")
    assert turn.status == "done", turn.error
    assert CompressionEvent.objects.get(conversation=conversation, trigger="error_recovery").status == "compressed"


def test_three_overflows_in_a_row_end_the_turn_with_the_clear_error(live, alice):
    from compression import settings_store

    conversation = make_conversation(alice, model="sim-claude-1m")
    settings_store.save_group("compression", {"protect_last_n": 2})
    for i in range(12):
        run_turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 300)
    # Each overflow names a smaller window, so each compaction keeps a smaller tail and makes
    # progress; the attempts cap is what ends the turn. Summary requests pass untouched.
    for window in (400_000, 250_000, 150_000, 90_000):
        sim_control(live, "/_sim/faults", {"fault": f"overflow_turn={window}", "count": 1})
    turn = run_turn(alice, conversation, "one more")
    assert turn.status == "failed"
    assert "/compress" in turn.error and "larger context window" in turn.error
    assert "after 3 compressions" in turn.error
    recoveries = CompressionEvent.objects.filter(conversation=conversation, trigger="error_recovery")
    assert [e.status for e in recoveries.order_by("id")] == ["compressed"] * 3


def test_a_413_with_compression_disabled_fails_without_compressing(live, alice):
    from compression import settings_store

    conversation = make_conversation(alice)
    for i in range(6):
        run_turn(alice, conversation, f"note {i}")
    settings_store.save_group("compression", {"enabled": False})
    sim_control(live, "/_sim/faults", {"fault": "413", "count": 1})
    turn = run_turn(alice, conversation, "hello")
    assert turn.status == "failed" and "/new" in turn.error and "ompression" not in turn.error
    assert not CompressionEvent.objects.filter(conversation=conversation).exists()


def test_gateway_hygiene_runs_before_the_turn(live, alice):
    conversation = make_conversation(alice)
    for i in range(6):
        run_turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 200)
    session = session_active(conversation)
    session.last_prompt_tokens = int(64_000 * 0.86)
    session.save(update_fields=["last_prompt_tokens"])
    turn = run_turn(alice, conversation, "continue please")
    assert turn.status == "done", turn.error
    event = CompressionEvent.objects.get(conversation=conversation, trigger="hygiene")
    assert event.status == "compressed" and event.in_place
    assert event.finished_at <= turn.started_at  # the compression ran first


def test_a_summary_outage_leaves_the_session_exactly_as_it_was(live, alice):
    from sessions.services.compaction import compression_request

    conversation = make_conversation(alice)
    for i in range(8):
        run_turn(alice, conversation, f"Tell me about topic {i}. " + "context " * 100)
    session = session_active(conversation)
    before = list(Message.objects.filter(session=session).values_list("id", "archived", "seq"))
    sim_control(live, "/_sim/faults", {"fault": "529", "count": 10})  # the aux model is down
    compression_request(conversation_id=conversation.id, trigger="admin")
    wait_compressions_settled(conversation)
    event = CompressionEvent.objects.filter(conversation=conversation).latest("id")
    assert event.status == "failed" and ("529" in event.reason or "overloaded" in event.reason.lower())
    session.refresh_from_db()
    assert session.ended_at is None and session.cooldown_until
    assert list(Message.objects.filter(session=session).values_list("id", "archived", "seq")) == before
    # /compress still works during the cooldown.
    sim_control(live, "/_sim/faults", {"clear": True})
    compression_request(conversation_id=conversation.id, trigger="manual", force=True)
    wait_compressions_settled(conversation)
    assert CompressionEvent.objects.filter(conversation=conversation).latest("id").status == "compressed"
