"""Cache-aware compaction timing, with the clock injected: compact on return after a break longer
than the cache's longest entry (every such return at or above the share with ``at_share``; with
``due_this_turn``, the default, only one whose threshold a turn's growth would reach), defer while
warm with room left, never defer past the threshold."""
from __future__ import annotations

import pytest

from compression.core.compaction_timing import (
    AT_SHARE,
    COMPACT,
    DEFAULT_IDLE_WHEN,
    DEFER,
    DUE_THIS_TURN,
    NONE,
    ONE_HOUR,
    TimingInput,
    longest_ttl_seconds,
    timing_decision,
)

T0 = 1_000_000.0


def facts(*, idle: float, projected: int, threshold: int = 100_000, ttl: float = 300.0,
          growth: float = 4_000.0, within: float | None = 3_000.0) -> TimingInput:
    return TimingInput(now=T0 + idle, last_call_at=T0, ttl_seconds=ttl, projected=projected,
                       threshold=threshold, growth_per_turn=growth, growth_within_turn=within)


def test_a_return_after_the_cache_expired_compacts_when_the_conversation_is_large_enough():
    decision = timing_decision(facts(idle=74 * 60, projected=78_000, ttl=ONE_HOUR), idle_when=AT_SHARE)
    assert decision.action == COMPACT
    assert decision.reason.startswith("compacted on return after 74 minutes: the cache had expired")
    assert "78%" in decision.reason
    assert decision.idle_seconds == 74 * 60


def test_the_same_pause_inside_the_cache_lifetime_does_not_compact():
    # 50 minutes is inside a 1h entry's life; 6 minutes is past a 5m entry's.
    for when, projected in ((AT_SHARE, 78_000), (DUE_THIS_TURN, 97_500)):
        assert timing_decision(facts(idle=50 * 60, projected=projected, ttl=ONE_HOUR, growth=1_000),
                               idle_when=when).action != COMPACT
        assert timing_decision(facts(idle=6 * 60, projected=projected, ttl=300.0, growth=1_000),
                               idle_when=when).action == COMPACT


def test_a_cold_return_below_the_share_leaves_the_conversation_alone():
    decision = timing_decision(facts(idle=3 * 3600, projected=69_000), idle_when=AT_SHARE)
    assert decision.action == NONE
    assert timing_decision(facts(idle=3 * 3600, projected=69_000), idle_share=0.6, idle_when=AT_SHARE).action == COMPACT
    # This turn's growth would reach the threshold, but the share is the floor of either rule.
    assert timing_decision(facts(idle=3 * 3600, projected=69_000, within=40_000)).action == NONE


def test_the_default_compacts_on_return_only_when_the_threshold_is_due_this_turn():
    assert DEFAULT_IDLE_WHEN == DUE_THIS_TURN
    # 22,000 tokens left, 3,000 expected within the turn: the threshold comes in a later turn, at a
    # warm moment or at another break; the compaction is not moved forward.
    early = timing_decision(facts(idle=74 * 60, projected=78_000, ttl=ONE_HOUR))
    assert early.action == NONE
    assert early.reason == ("the cache had expired, but at 78% of the threshold the compaction is not due this turn "
                            "(22,000 tokens left, about 3,000 expected within this turn)")
    # 2,500 left, 3,000 expected: this turn's tool calls would cross the threshold, with the
    # cache warm again; the compaction moves to the cold start of the turn.
    due = timing_decision(facts(idle=74 * 60, projected=97_500, ttl=ONE_HOUR))
    assert due.action == COMPACT
    assert due.reason == ("compacted on return after 74 minutes: the cache had expired (1h entries), and the "
                          "conversation was at 98% of the threshold, due this turn")
    # Exactly the growth within the turn left is due; one token more is not.
    assert timing_decision(facts(idle=7200, projected=97_000)).action == COMPACT
    assert timing_decision(facts(idle=7200, projected=96_999)).action == NONE
    # A conversation of plain replies (one call a turn) grows nothing within a turn: its next
    # turn starts below the threshold and ends there, so a break never compacts it early.
    assert timing_decision(facts(idle=7200, projected=99_900, within=0.0)).action == NONE


def test_without_a_known_growth_the_default_does_not_compact_early():
    decision = timing_decision(facts(idle=7200, projected=99_000, within=None))
    assert decision.action == NONE
    assert "the growth within a turn is not known yet" in decision.reason
    assert timing_decision(facts(idle=7200, projected=99_000, within=None), idle_when=AT_SHARE).action == COMPACT


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="idle_when must be one of due_this_turn, at_share"):
        timing_decision(facts(idle=7200, projected=99_000), idle_when="sometimes")


def test_warm_with_room_left_but_the_threshold_near_defers_and_says_why():
    decision = timing_decision(facts(idle=40, projected=92_000, growth=4_000))
    assert decision.action == DEFER
    assert "8,000 tokens, about 2 turns" in decision.reason
    assert "at the next break or at the threshold" in decision.reason


def test_warm_and_far_from_the_threshold_is_neither_compact_nor_defer():
    assert timing_decision(facts(idle=40, projected=75_000, growth=4_000)).action == NONE
    assert timing_decision(facts(idle=40, projected=92_000, growth=0)).action == NONE


@pytest.mark.parametrize("idle", [10, 400, 7200])
def test_never_deferred_past_the_threshold(idle):
    for projected in (100_000, 130_000):
        decision = timing_decision(facts(idle=idle, projected=projected))
        assert decision.action == NONE
        assert "ordinary rule" in decision.reason


def test_without_a_cache_or_a_previous_call_there_is_nothing_to_time():
    assert timing_decision(facts(idle=7200, projected=90_000, ttl=0.0)).action == NONE
    first = TimingInput(now=T0, last_call_at=None, ttl_seconds=300.0, projected=90_000, threshold=100_000,
                        growth_per_turn=1_000)
    assert timing_decision(first).action == NONE


def test_a_strategy_longest_entry():
    assert longest_ttl_seconds(enabled=False, strategy="system_and_3", cache_ttl="1h") == 0.0
    assert longest_ttl_seconds(enabled=True, strategy="none", cache_ttl="5m") == 0.0  # nothing is cached
    assert longest_ttl_seconds(enabled=True, strategy="system_and_3", cache_ttl="5m") == 300.0
    assert longest_ttl_seconds(enabled=True, strategy="system_and_3", cache_ttl="1h") == ONE_HOUR
    assert longest_ttl_seconds(enabled=True, strategy="rolling_1h", cache_ttl="5m") == ONE_HOUR
