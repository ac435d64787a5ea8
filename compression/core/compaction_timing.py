"""When to compact, given the prompt cache: cache-aware compaction timing.

A compaction changes the request's prefix, so the next call writes the whole prompt to the cache
again. While the cache is warm that rewrite is a cost the compaction adds; once the cache has
expired (a pause longer than its longest live entry) every token is written again anyway, so a
compaction then costs no extra rewrite. Three rules, checked before a turn's first model call:

- **Idle compaction**: the conversation returns after a pause longer than its longest live cache
  entry and the projected request is at or above ``idle_share`` of the threshold: compact now,
  when ``idle_when`` allows it:

  - ``due_this_turn`` (the default): only when the projection plus the growth expected within
    this turn (after its first call: its tool calls and results, averaged over the recent turns)
    reaches the threshold, so the compaction would come during this turn anyway, with the cache warm
    again and a rewrite to pay. The compaction moves to the cold moment rather than adding one
    (the expectation is an average, so a turn that reads nothing may be compacted a turn or two
    early). A conversation of plain replies (one call a turn) never crosses the threshold after
    a turn's start, so it is never compacted early.
  - ``at_share``: on every such return. More compactions, each at a cold moment: the
    conversation holds less after a break, which lowers the bill and what stays verbatim.
- **Deferral**: the cache is warm and the projection says the threshold is near (within
  ``horizon_turns`` turns at the recent growth) but not reached: do not compact early; wait for
  the next cold moment (a break) or the threshold itself.
- **Never past the threshold**: at or above the threshold the ordinary rule fires, whatever the cache.

Pure: the clock is an argument (``now`` and ``last_call_at`` in seconds on one clock).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

COMPACT: Literal["compact"] = "compact"
DEFER: Literal["defer"] = "defer"
NONE: Literal["none"] = "none"

DEFAULT_IDLE_SHARE = 0.70
DEFAULT_HORIZON_TURNS = 3
DUE_THIS_TURN = "due_this_turn"
AT_SHARE = "at_share"
IDLE_WHEN_CHOICES = (DUE_THIS_TURN, AT_SHARE)
DEFAULT_IDLE_WHEN = DUE_THIS_TURN

FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
# Strategies whose breakpoints include a 1-hour entry whatever `cache_ttl` says
# (compression.core.caching's strategy table): their longest live entry is an hour.
_ONE_HOUR_STRATEGIES = frozenset({"rolling_1h", "warm_anchor", "stable_prefix"})


def longest_ttl_seconds(*, enabled: bool, strategy: str, cache_ttl: str) -> float:
    """The lifetime of the longest cache entry a strategy writes (0.0: nothing is cached)."""
    if not enabled or strategy == "none":
        return 0.0
    if cache_ttl == "1h" or strategy in _ONE_HOUR_STRATEGIES:
        return ONE_HOUR
    return FIVE_MINUTES


@dataclass(frozen=True)
class TimingInput:
    now: float
    last_call_at: float | None  # the session's last model call (it refreshed the cache), None: never
    ttl_seconds: float  # longest_ttl_seconds(); 0.0 when prompt caching is off
    projected: int  # the projected next request, in tokens (SPEC §3.4)
    threshold: int  # the compression threshold, in tokens
    growth_per_turn: float  # the request's recent growth per turn, in tokens (0: unknown)
    # the growth expected within this turn after its first call (its tool calls and results),
    # averaged over the recent turns, in tokens; None: unknown
    growth_within_turn: float | None = None


@dataclass(frozen=True)
class TimingDecision:
    action: Literal["compact", "defer", "none"]
    reason: str
    idle_seconds: float | None = None


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def _ttl_words(ttl: float) -> str:
    return "1h" if ttl >= ONE_HOUR else "5m"


def _not_due(facts: TimingInput, share: float, idle: float) -> TimingDecision | None:
    """``due_this_turn``: a cold return whose threshold is not reached by the growth expected
    within this turn is left alone (None: the compaction is due)."""
    room = facts.threshold - facts.projected
    within = facts.growth_within_turn
    if within is not None and within > 0 and room <= within:
        return None
    expected = ("the growth within a turn is not known yet" if within is None
                else f"about {within:,.0f} expected within this turn")
    return TimingDecision(NONE, f"the cache had expired, but at {share:.0%} of the threshold the compaction is "
                                f"not due this turn ({room:,} tokens left, {expected})", idle)


def timing_decision(facts: TimingInput, *, idle_share: float = DEFAULT_IDLE_SHARE,
                    horizon_turns: int = DEFAULT_HORIZON_TURNS,
                    idle_when: str = DEFAULT_IDLE_WHEN) -> TimingDecision:
    """What the cache says about compacting before this turn (see the module's rules)."""
    if idle_when not in IDLE_WHEN_CHOICES:
        raise ValueError(f"idle_when must be one of {', '.join(IDLE_WHEN_CHOICES)}, not {idle_when!r}")
    if facts.threshold <= 0 or facts.ttl_seconds <= 0 or facts.last_call_at is None:
        return TimingDecision(NONE, "no prompt cache to time against")
    if facts.projected >= facts.threshold:
        return TimingDecision(NONE, "at the threshold: the ordinary rule decides")
    idle = max(0.0, facts.now - facts.last_call_at)
    share = facts.projected / facts.threshold
    if share < idle_share:
        return TimingDecision(NONE, f"at {share:.0%} of the threshold, below {idle_share:.0%}", idle)
    if idle > facts.ttl_seconds:
        waiting = _not_due(facts, share, idle) if idle_when == DUE_THIS_TURN else None
        if waiting is not None:
            return waiting
        due = ", due this turn" if idle_when == DUE_THIS_TURN else ""
        return TimingDecision(
            COMPACT, f"compacted on return after {_duration(idle)}: the cache had expired "
                     f"({_ttl_words(facts.ttl_seconds)} entries), and the conversation was at {share:.0%} "
                     f"of the threshold{due}", idle)
    room = facts.threshold - facts.projected
    if facts.growth_per_turn > 0 and room <= horizon_turns * facts.growth_per_turn:
        turns = max(1, round(room / facts.growth_per_turn))
        return TimingDecision(
            DEFER, f"compaction deferred while the cache is warm (last call {_duration(idle)} ago): "
                   f"{room:,} tokens, about {turns} turn{'s' if turns != 1 else ''}, remain before the "
                   "threshold; it runs at the next break or at the threshold", idle)
    return TimingDecision(NONE, "the cache is warm and the threshold is not near", idle)
