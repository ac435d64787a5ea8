"""The projected next request (SPEC §3.4), the threshold rule in one call (§4), and the pressure
level a page reads from them."""
from __future__ import annotations

from compression.core.markers import SUMMARY_KEY
from compression.core.projection import (
    BASIS_COUNTED,
    BASIS_REAL,
    RATIO_BOUNDS,
    RATIO_PRIOR,
    clamp_ratio,
    pressure_level,
    project_next_request,
    ratio_of,
    tool_schema_tokens,
    turn_growth,
)
from compression.core.thresholds import threshold_rule
from compression.core.tokens import count_tokens, tools_text


def test_a_real_count_plus_what_was_appended_since_in_provider_tokens():
    p = project_next_request(counted=12_000, last_real=30_000, counted_at_last_real=10_000, ratio=1.25)
    assert (p.tokens, p.basis, p.last_real, p.counted, p.ratio) == (32_500, BASIS_REAL, 30_000, 12_000, 1.25)


def test_without_a_real_count_the_counted_request_times_the_ratio():
    assert project_next_request(counted=40_000, ratio=1.1).tokens == 44_000
    p = project_next_request(counted=40_000, last_real=-1, counted_at_last_real=39_000)  # right after a compaction
    assert (p.tokens, p.basis, p.ratio) == (40_000, BASIS_COUNTED, RATIO_PRIOR)
    # A real count without the counted request it answered is a floor, nothing more.
    assert project_next_request(counted=5_000, last_real=9_000, counted_at_last_real=0).tokens == 9_000
    assert project_next_request(counted=10_000, last_real=9_000, counted_at_last_real=0).tokens == 10_000


def test_a_shrunk_context_projects_below_the_last_real_count_never_below_zero():
    assert project_next_request(counted=8_000, last_real=30_000, counted_at_last_real=10_000).tokens == 28_000
    assert project_next_request(counted=0, last_real=100, counted_at_last_real=10_000).tokens == 0


def test_the_ratio_is_measured_clamped_and_starts_at_the_prior():
    assert ratio_of(0, 0) == RATIO_PRIOR
    assert ratio_of(1_300, 1_000) == 1.3
    assert ratio_of(10_000, 1_000) == RATIO_BOUNDS[1]
    assert clamp_ratio(float("nan")) == clamp_ratio("x") == clamp_ratio(-2) == RATIO_PRIOR
    assert clamp_ratio(0.1) == RATIO_BOUNDS[0]


def test_chars_over_four_is_not_part_of_it():
    prose = "The quarterly review went well and everyone agreed on the plan for next year. " * 400
    counted = count_tokens(prose)
    assert len(prose) / 4 > 1.1 * counted  # chars/4 runs ahead of the counted size on English prose
    assert project_next_request(counted=counted).tokens == counted


def test_tool_schemas_are_counted_with_the_tokenizer():
    tools = [{"name": "read_file", "description": "Read a file.", "parameters": {"type": "object"}}]
    assert tool_schema_tokens(tools) == count_tokens(tools_text(tools)) > 0
    assert tool_schema_tokens([]) == tool_schema_tokens(None) == 0


def test_turn_growth_is_the_largest_of_the_recent_turns():
    msgs = [{"role": "system"}, {"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "assistant"},
            {"role": "tool"}, {"role": "assistant"}, {"role": "user", SUMMARY_KEY: True}, {"role": "user"},
            {"role": "assistant"}]
    sizes = [500, 10, 90, 20, 30, 400, 50, 3_000, 5, 5]
    # Turns: 10+90=100 · 20+30+400+50 (+ the summary, which is no user turn) = 3,500 · 5+5=10.
    assert turn_growth(msgs, sizes) == 3_500
    assert turn_growth(msgs, sizes, turns=1) == 10
    assert turn_growth(msgs[:1], sizes[:1]) == 0


def test_the_level_warns_while_one_more_turn_could_cross_the_threshold():
    # threshold 100,000 in a 200,000 window (hygiene at 170,000)
    assert pressure_level(0, 100_000, 200_000) == "none"
    assert pressure_level(70_000, 100_000, 200_000, growth=5_000) == "ok"
    assert pressure_level(70_000, 100_000, 200_000, growth=30_000) == "warn"  # 70K + 30K reaches it
    assert pressure_level(80_000, 100_000, 200_000) == "warn"  # 80 % of the threshold, whatever the growth
    assert pressure_level(100_000, 100_000, 200_000) == "high"
    assert pressure_level(170_000, 100_000, 200_000) == "critical"


def test_the_threshold_rule_in_one_call():
    assert threshold_rule(200_000).tokens == 100_000
    assert threshold_rule(64_000, max_tokens=4_096).tokens == 50_918  # the 85 % fallback of 59,904
    assert threshold_rule(200_000, max_tokens=65_536).tokens == 67_232
    capped = threshold_rule(200_000, summariser_window=70_000)
    assert (capped.tokens, capped.lowered_to) == (70_000, 70_000)
    codex = threshold_rule(400_000, 0.5, provider="openai-codex", model="gpt-5.5")
    assert codex.decision.raised and codex.tokens == 340_000
    assert threshold_rule(400_000, 0.5, provider="openai-codex", model="gpt-5.5", codex_autoraise=False).tokens == 200_000
