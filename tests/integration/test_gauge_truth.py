"""The gauge tells the truth (SPEC §3.4, §5.2), on real workers: the first automatic compaction
fires with the real context close to the threshold the page showed (never at two thirds of it, as
a chars/4 preflight did on English prose), after the gauge read "warn", and no request before it
went far past the threshold. With long English replies on the 64K and 200K models, with tool-heavy
JSON turns, and with CJK text on a provider whose tokenizer counts 30 % more than the product's.
"""
from __future__ import annotations

import json

import pytest

from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from sessions.models import ApiCall, CompressionEvent
from sessions.presenters import gauge
from sessions.services.context import message_append, session_active
from sessions.services.turns import turn_submit
from tests.integration.helpers import make_conversation, sim_control, wait_turn

pytestmark = pytest.mark.integration

PROSE = ("The review of the quarter went well: the team shipped the new billing page, cleaned up the "
         "old reports and agreed to spend the next month on the onboarding flow, which customers keep "
         "asking about. ")
CJK = "我们下周一在上海开会，讨论新的预算方案和项目进度，请大家提前准备好各自负责部分的报告。"
AUTOMATIC = ("preflight", "post_response", "hygiene")


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/reset", {})
    yield
    sim_control(live, "/_sim/reset", {})


def seed(conversation, share: float, text: str) -> None:
    """Fill the context to about ``share`` of the gauge's threshold with earlier exchanges, so the
    test reaches the threshold in a few turns (their real size is measured by the first turn)."""
    session = session_active(conversation)
    target = share * gauge(conversation)["threshold"]
    while gauge(conversation)["tokens"] < target:
        message_append(session=session, role="user", content="Tell me more. " + text[:200])
        message_append(session=session, role="assistant", content=text * 12)


def json_files(conversation, n: int) -> None:
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        records = [{"id": i * 1000 + j, "service": f"api-{j % 9}", "status": "degraded" if j % 5 else "ok",
                    "latency_ms": 40 + j * 3, "region": ["eu-west-1", "us-east-2", "ap-south-1"][j % 3]}
                   for j in range(20)]
        (conversation.workspace / f"status_{i}.json").write_text(json.dumps(records, indent=1))


def agent_calls(conversation):
    return ApiCall.objects.filter(conversation=conversation, purpose="agent", error="").order_by("id")


def run_until_compaction(user, conversation, messages, max_turns: int = 60) -> dict:
    """Send ``messages(i)`` turn by turn until the first automatic compaction. For each turn: the
    gauge as the page showed it before the turn, the message, and the real prompt of the turn's
    first model call (when no compaction ran before it)."""
    turns = []
    for i in range(max_turns):
        before, text = gauge(conversation), messages(i)
        seen = agent_calls(conversation).count()
        turn = wait_turn(turn_submit(user=user, conversation_id=conversation.id, text=text).turn, 90)
        assert turn.status == "done", turn.error
        event = CompressionEvent.objects.filter(conversation=conversation, trigger__in=AUTOMATIC,
                                                status="compressed").order_by("id").first()
        first = agent_calls(conversation)[seen:seen + 1]
        turns.append({"gauge": before, "text": text, "first_real": first[0].prompt_tokens if first else None})
        if event is not None:
            real = list(agent_calls(conversation).filter(created_at__lt=event.started_at)
                        .values_list("prompt_tokens", flat=True))
            return {"event": event, "turns": turns, "real_before": real}
    raise AssertionError(f"no automatic compaction in {max_turns} turns; last gauge {turns[-1]['gauge']}")


def check_truth(run: dict) -> None:
    event, turns, real = run["event"], run["turns"], run["real_before"]
    shown = turns[-1]["gauge"]  # the gauge before the turn that compacted
    threshold = shown["threshold"]
    # The real context when the compaction fired: the last real prompt before it (the request it
    # stopped would have been larger still).
    assert real and real[-1] >= 0.9 * threshold, (real[-3:], threshold, event.trigger, event.tokens_before)
    # No request before it went past the threshold by more than a rounding error.
    assert max(real) <= 1.02 * threshold, (max(real), threshold, event.trigger)
    # The page said so first: "warn" at least one turn before the compacting one, and never "ok"
    # right before it (at that point it may read "high": the projection already crossed).
    levels = [t["gauge"]["level"] for t in turns]
    assert levels[-1] in ("warn", "high") and levels[-2] == "warn", list(zip(levels, [t["gauge"]["tokens"] for t in turns]))
    # What the gauge projected before each measured turn was that turn's first real prompt, less
    # the new message (which the page could not know): within 1 % of the threshold.
    measured = [t for t in turns[1:-1] if t["first_real"]]
    assert measured
    for t in measured:
        message = round((count_tokens(t["text"]) + MESSAGE_OVERHEAD_TOKENS) * t["gauge"]["ratio"])
        assert abs(t["first_real"] - message - t["gauge"]["tokens"]) <= 0.01 * threshold, (t, message)


@pytest.mark.parametrize("model", ["sim-claude-64k", "sim-claude-200k"])
def test_long_english_replies_compact_where_the_marker_is(live, alice, model):
    conversation = make_conversation(alice, model)
    seed(conversation, 0.55, PROSE)
    run = run_until_compaction(alice, conversation, lambda i: f"Thanks. Now reply with 1500 words on point {i}.")
    check_truth(run)


def test_tool_heavy_json_turns_compact_where_the_marker_is(live, alice):
    conversation = make_conversation(alice, "sim-claude-64k")
    json_files(conversation, 40)
    seed(conversation, 0.5, PROSE)
    sim_control(live, "/_sim/tokens", {"scale": 1.3})  # a provider tokenizer 30 % above the product's
    run = run_until_compaction(alice, conversation, lambda i: f"read the file status_{i}.json")
    check_truth(run)
    assert gauge(conversation)["ratio"] >= 1.2  # measured from the responses, not assumed


def test_cjk_text_compacts_where_the_marker_is(live, alice):
    conversation = make_conversation(alice, "sim-claude-64k")
    seed(conversation, 0.5, CJK)
    sim_control(live, "/_sim/tokens", {"scale": 1.3})
    run = run_until_compaction(alice, conversation, lambda i: f"repeat exactly: {i} " + CJK * 25)
    check_truth(run)
