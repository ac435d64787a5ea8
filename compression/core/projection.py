"""The projected size of the next request (SPEC §3.4) and the pressure level a page shows for it.

Every trigger (hygiene, preflight, post-response without usage) and every figure a page shows
(the gauge, the sidebar and staff rows, /metrics, the feasibility warnings) asks
``project_next_request``; the threshold it is compared with comes from
``thresholds.threshold_rule``.

Guarantees:
- With a real prompt count from the provider (``last_real`` > 0) and the counted size of the
  request that produced it, the projection is ``last_real + (counted − counted_at_last_real) ×
  ratio``: what the provider said, plus what was appended since in provider tokens. The rough
  chars/4 estimate is never part of it (it runs ~1.5× ahead of real counts on English prose).
- Without one (a new session, or right after a compaction), it is ``counted × ratio``; a real count
  whose request was not counted (stored before these counts were kept) is taken as a floor.
- ``ratio`` is the model's measured real-to-counted ratio, clamped to ``RATIO_BOUNDS``; 1.0 (the
  prior) until a response has been measured. Older samples weigh ``RATIO_DECAY`` less at each
  measured response, so a model's ratio follows what its conversations hold now.
- ``pressure_level`` reads "warn" while one more turn like the recent ones could cross the
  threshold, so a compaction never follows a reading of "ok" unless one message outgrows every
  recent turn.
- Pure functions of the numbers given; tool schema counts are memoised by their text.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .hygiene import hygiene_threshold
from .markers import SUMMARY_KEY
from .tokens import count_tokens, tools_text

RATIO_PRIOR = 1.0
RATIO_BOUNDS = (0.5, 3.0)
RATIO_DECAY = 0.8  # the weight older samples keep at each new response
WARN_SHARE = 0.8  # of the threshold: "warn" from here on whatever the recent turns did
GROWTH_TURNS = 3  # recent turns whose growth predicts the next one

BASIS_REAL = "real"  # last real prompt + growth since
BASIS_COUNTED = "counted"  # no real prompt to start from


@dataclass(frozen=True)
class Projection:
    tokens: int  # the projected next request, in provider tokens
    basis: str  # BASIS_REAL or BASIS_COUNTED
    last_real: int  # the last real prompt count the provider reported (0: none since a compaction)
    counted: int  # the counted size of the next request (tiktoken, stored per message)
    ratio: float


def clamp_ratio(ratio: Any) -> float:
    try:
        value = float(ratio)
    except (TypeError, ValueError):
        return RATIO_PRIOR
    if value != value or value <= 0:  # NaN or nonsense
        return RATIO_PRIOR
    return min(max(value, RATIO_BOUNDS[0]), RATIO_BOUNDS[1])


def ratio_of(real_sum: float, counted_sum: float) -> float:
    """The measured ratio from decayed sums of real and counted prompt tokens (the prior without any)."""
    return clamp_ratio(real_sum / counted_sum) if counted_sum and counted_sum > 0 and real_sum > 0 else RATIO_PRIOR


def project_next_request(*, counted: int, last_real: int = 0, counted_at_last_real: int = 0,
                         ratio: float = RATIO_PRIOR) -> Projection:
    ratio = clamp_ratio(ratio)
    counted = max(0, int(counted))
    if last_real > 0 and counted_at_last_real > 0:
        tokens = last_real + round((counted - counted_at_last_real) * ratio)
        return Projection(max(0, tokens), BASIS_REAL, last_real, counted, ratio)
    if last_real > 0:  # a real count whose request was not counted (stored before counts were kept)
        return Projection(max(last_real, round(counted * ratio)), BASIS_REAL, last_real, counted, ratio)
    return Projection(round(counted * ratio), BASIS_COUNTED, 0, counted, ratio)


@functools.lru_cache(maxsize=256)
def _text_tokens(text: str) -> int:
    return count_tokens(text)


def tool_schema_tokens(tools: Iterable[Mapping[str, Any]] | None) -> int:
    """Counted tokens of the tool schemas offered with a request (name, description, parameters)."""
    return _text_tokens(tools_text(tools)) if tools else 0


def turn_growth(messages: Sequence[Mapping[str, Any]], sizes: Sequence[int], *, turns: int = GROWTH_TURNS) -> int:
    """The largest counted growth of one of the last ``turns`` turns: a user message and everything
    up to the next one (replies, tool calls, tool results). ``sizes`` is each message's counted size."""
    growths: list[int] = []
    current: int | None = None
    for msg, size in zip(messages, sizes, strict=False):
        if msg.get("role") == "user" and not msg.get(SUMMARY_KEY):
            if current is not None:
                growths.append(current)
            current = 0
        if current is not None:
            current += size
    if current is not None:
        growths.append(current)
    return max(growths[-turns:], default=0)


# The level in words, so the gauge reads without its colours.
LEVEL_LABELS = {"none": "Empty", "ok": "OK", "warn": "Nearing the compression threshold",
                "high": "Over the compression threshold", "critical": "Critical: past gateway hygiene (85 %)"}


def pressure_level(tokens: int, threshold: int, window: int, *, growth: int = 0) -> str:
    """none (nothing yet) · ok · warn (one more turn of ``growth`` could cross the threshold, or past
    80 % of it) · high (at the threshold, below gateway hygiene's 85 %) · critical."""
    if tokens <= 0:
        return "none"
    if tokens < threshold:
        return "ok" if tokens < WARN_SHARE * threshold and tokens + max(0, growth) < threshold else "warn"
    return "high" if tokens < hygiene_threshold(window) else "critical"
