"""One projection, one threshold rule: the gauge, the sidebar row, the home page row, the staff
dashboard row and /metrics read the same conversation to the token, whether it has real usage,
a measured ratio, a compaction waiting for usage, or nothing sent yet; and the threshold rule is
written in one module."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from sessions.models import ModelTokenRatio
from sessions.presenters import conversation_rows, gauge, sidebar_rows
from sessions.selectors import conversation_list_for_user
from sessions.services import pressure
from sessions.services.context import context_messages, message_append, session_active, session_start
from sessions.services.runtime import current_config
from staff.selectors import conversation_pressure, pressure_levels
from tests.web.test_sidebar import chat

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def measured(conversation, *, real: int, ratio: float | None = None, more: int = 0) -> None:
    """The provider reported ``real`` for the request as it stands now; ``more`` exchanges follow."""
    cfg = current_config()
    session = session_active(conversation)
    counted = pressure.counted_request(context_messages(session), pressure.offered_tools(cfg).all)
    session.last_prompt_tokens, session.counted_prompt_tokens = real, counted
    session.save()
    if ratio:
        ModelTokenRatio.objects.create(model=conversation.model, real_sum=ratio * 1000, counted_sum=1000, samples=1)
    for i in range(more):
        message_append(session=session, role="user", content=f"and then {i} " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"noted {i} " + "answer " * 400)


def everything_agrees(owner, conversation) -> dict:
    cfg = current_config()
    g = gauge(conversation, cfg=cfg)
    side = next(r for r in sidebar_rows([conversation], cfg=cfg) if r["c"].id == conversation.id)
    listed = conversation_list_for_user(user=owner, including=conversation.id)
    home = next(r for r in conversation_rows(listed, cfg=cfg) if r["c"].id == conversation.id)
    staff = next(r for r in conversation_pressure(cfg=cfg)["rows"] if r["conversation"].id == conversation.id)
    assert (staff["tokens"], staff["threshold"], staff["window"]) == (g["tokens"], g["threshold"], g["window"])
    assert side["pct"] == round(100.0 * g["tokens"] / g["window"])
    assert home["usage_pct"] == round(100.0 * g["tokens"] / g["window"], 1)
    assert staff["level"] == side["level"]
    return g


def test_real_usage_with_a_measured_ratio_and_appended_messages(alice):
    c = chat(alice, "Measured", "first question " * 50, "first answer " * 400)
    measured(c, real=30_000, ratio=1.25, more=3)
    g = everything_agrees(alice, c)
    appended = sum(pressure.message_size(m) for m in context_messages(session_active(c))[3:])
    assert (g["basis"], g["last_real"], g["ratio"]) == ("real", 30_000, 1.25)
    assert g["tokens"] == 30_000 + round(appended * 1.25)


def test_nothing_sent_yet_and_right_after_a_compaction(alice):
    fresh = chat(alice, "Fresh", "only a question")
    g = everything_agrees(alice, fresh)
    assert g["basis"] == "counted" and g["last_real"] == 0 and g["tokens"] > 0
    compacted = chat(alice, "Compacted", "q " * 100, "a " * 100)
    session = session_active(compacted)
    session.last_prompt_tokens, session.counted_prompt_tokens = -1, 9_999  # waiting for real usage
    session.save()
    g = everything_agrees(alice, compacted)
    assert g["basis"] == "counted" and g["last_real"] == 0


def test_an_empty_conversation_reads_empty_everywhere(alice):
    c = chat(alice, "Empty")
    g = everything_agrees(alice, c)
    assert (g["tokens"], g["level"]) == (0, "none")


def test_over_the_threshold_reads_high_and_metrics_count_it(alice):
    c = chat(alice, "Busy", "question", "answer")
    measured(c, real=52_000)  # sim-claude-64k: threshold 50,918, hygiene at 54,400
    g = everything_agrees(alice, c)
    assert (g["tokens"], g["threshold"], g["level"]) == (52_000, 50_918, "high")
    assert pressure_levels(cfg=current_config())["high"] == 1


def test_the_threshold_rule_is_written_in_one_module():
    """The SPEC §4 arithmetic (the share and the 64,000 floor, the 85 % fallback, the summariser's
    cap) lives in compression/core/thresholds.py and is put together by threshold_rule alone."""
    found = subprocess.run(["grep", "-rnE", r"compute_threshold_tokens\(|cap_threshold_tokens\(|SMALL_WINDOW_TRIGGER_RATIO",
                            "compression", "sessions", "staff", "llm", "simulator", "plugins", "bench",
                            "--include=*.py"], cwd=ROOT, capture_output=True, text=True).stdout.splitlines()
    assert {line.split(":")[0] for line in found} == {"compression/core/thresholds.py"}, found
    calls = [line for line in found if re.search(r"(compute|cap)_threshold_tokens\(", line) and ":def " not in line]
    assert len(calls) == 2, calls  # one call of each, both inside threshold_rule


def test_a_session_started_fresh_has_no_measurements(alice):
    c = chat(alice, "New")
    s = session_start(conversation=c)
    assert (s.last_prompt_tokens, s.counted_prompt_tokens) == (0, 0)
