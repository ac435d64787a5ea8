"""When to compact, given the prompt cache: cache-aware compaction timing.

A compaction changes the request's prefix, so the next call writes the whole prompt to the cache
again. While the cache is warm that rewrite is a cost the compaction adds; once the cache has
expired (a pause longer than its longest live entry) every token is written again anyway, so a
compaction then costs no extra rewrite. Three rules, checked before a turn's first model call:

- **Idle compaction**: the conversation returns after a pause longer than its longest live cache
  entry and the projected request is at or above ``idle_share`` of the threshold: compact now.
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


def timing_decision(facts: TimingInput, *, idle_share: float = DEFAULT_IDLE_SHARE,
                    horizon_turns: int = DEFAULT_HORIZON_TURNS) -> TimingDecision:
    """What the cache says about compacting before this turn (see the module's rules)."""
    if facts.threshold <= 0 or facts.ttl_seconds <= 0 or facts.last_call_at is None:
        return TimingDecision(NONE, "no prompt cache to time against")
    if facts.projected >= facts.threshold:
        return TimingDecision(NONE, "at the threshold: the ordinary rule decides")
    idle = max(0.0, facts.now - facts.last_call_at)
    share = facts.projected / facts.threshold
    if share < idle_share:
        return TimingDecision(NONE, f"at {share:.0%} of the threshold, below {idle_share:.0%}", idle)
    if idle > facts.ttl_seconds:
        return TimingDecision(
            COMPACT, f"compacted on return after {_duration(idle)}: the cache had expired "
                     f"({_ttl_words(facts.ttl_seconds)} entries), and the conversation was at {share:.0%} "
                     "of the threshold", idle)
    room = facts.threshold - facts.projected
    if facts.growth_per_turn > 0 and room <= horizon_turns * facts.growth_per_turn:
        turns = max(1, round(room / facts.growth_per_turn))
        return TimingDecision(
            DEFER, f"compaction deferred while the cache is warm (last call {_duration(idle)} ago): "
                   f"{room:,} tokens, about {turns} turn{'s' if turns != 1 else ''}, remain before the "
                   "threshold; it runs at the next break or at the threshold", idle)
    return TimingDecision(NONE, "the cache is warm and the threshold is not near", idle)
