"""Threshold arithmetic (SPEC §4): when compression triggers, how big the tail and the summary may be.

Guarantees:
- ``compute_threshold_tokens`` is the SPEC §4 rule exactly: the 64,000 floor, the 85 % fallback when
  the floor reaches the effective window, and ``max_tokens`` reserved for the output. Hermes Agent's
  0.75 small-window floor is deliberately NOT applied (200,000 → 100,000).
- ``resolve_threshold`` applies the Codex autoraise (0.85 for gpt-5.4/5.5/5.6 on ``openai-codex``),
  which only ever raises the configured value, and says whether a notice is due.
- ``threshold_rule`` is the one place the whole rule is put together (window, configured share with
  the autoraise, the 64,000 floor, the output reserve, the summariser's window as a cap): every
  engine, page figure and warning asks it.
- Out-of-range inputs are clamped defensively (forms reject them; the engine must not crash).
- Pure functions; no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MINIMUM_CONTEXT_LENGTH = 64_000
SMALL_WINDOW_TRIGGER_RATIO = 0.85
DEFAULT_THRESHOLD = 0.50
DEFAULT_TARGET_RATIO = 0.20
TARGET_RATIO_MIN, TARGET_RATIO_MAX = 0.10, 0.80
SUMMARY_WINDOW_SHARE = 0.05
SUMMARY_TOKENS_CEILING = 12_000
CODEX_AUTORAISE_THRESHOLD = 0.85
CODEX_PROVIDER = "openai-codex"
# gpt-5.4 / 5.5 / 5.6 with optional "-…" or ".…" suffixes (e.g. gpt-5.5-pro), after an optional vendor prefix.
_CODEX_AUTORAISE_MODEL = re.compile(r"^(?:[\w.-]+/)?gpt-5\.[456](?:[-.].*)?$", re.IGNORECASE)


class ContextWindowTooSmall(ValueError):
    """The main model's window is under 64,000 tokens; the message names the setting to fix."""


def normalise_max_tokens(max_tokens: Any) -> int | None:
    """A positive int output reservation, or None (anything else means "no reservation")."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        return None
    return max_tokens


def clamp_threshold(threshold: Any) -> float:
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        return DEFAULT_THRESHOLD
    if not value > 0.0:  # also catches NaN
        return DEFAULT_THRESHOLD
    return min(value, 1.0)


def clamp_target_ratio(ratio: Any) -> float:
    try:
        value = float(ratio)
    except (TypeError, ValueError):
        return DEFAULT_TARGET_RATIO
    if value != value:  # NaN
        return DEFAULT_TARGET_RATIO
    return min(max(value, TARGET_RATIO_MIN), TARGET_RATIO_MAX)


def effective_window(context_length: int, max_tokens: Any = None) -> int:
    window = context_length - (normalise_max_tokens(max_tokens) or 0)
    return window if window > 0 else context_length


def compute_threshold_tokens(context_length: int, threshold: float = DEFAULT_THRESHOLD, max_tokens: Any = None) -> int:
    """Prompt tokens at which compression fires (SPEC §4).

    200,000 → 100,000; 262,144 → 131,072; 64,000 → 54,400; 200,000 with max_tokens 65,536 → 67,232.
    """
    window = effective_window(context_length, max_tokens)
    pct_value = int(window * clamp_threshold(threshold))
    floored = max(pct_value, MINIMUM_CONTEXT_LENGTH)
    if floored >= window:
        # The floor would never fire before the window is full: trigger at 85 % of it instead.
        return max(1, min(int(window * SMALL_WINDOW_TRIGGER_RATIO), window - 1))
    return floored


def cap_threshold_tokens(threshold_tokens: int, *caps: int | None) -> tuple[int, int | None]:
    """``(threshold, lowered_to)``: the threshold lowered to the smallest positive cap below it.

    The cap is the summariser's window (SPEC §7.1: it must be able to read what it summarises);
    ``lowered_to`` is None when no cap applied.
    """
    limit = min((int(c) for c in caps if isinstance(c, int) and not isinstance(c, bool) and c > 0), default=None)
    if limit is not None and limit < threshold_tokens:
        return limit, limit
    return threshold_tokens, None


def compute_tail_token_budget(threshold_tokens: int, target_ratio: float = DEFAULT_TARGET_RATIO) -> int:
    return int(threshold_tokens * clamp_target_ratio(target_ratio))


def compute_max_summary_tokens(context_length: int) -> int:
    return min(int(context_length * SUMMARY_WINDOW_SHARE), SUMMARY_TOKENS_CEILING)


def check_context_length(context_length: int) -> None:
    """Refuse a main model whose window is under 64,000 tokens (SPEC §4)."""
    if context_length < MINIMUM_CONTEXT_LENGTH:
        raise ContextWindowTooSmall(
            f"The model's context window ({context_length:,} tokens) is below the minimum of "
            f"{MINIMUM_CONTEXT_LENGTH:,} tokens needed for context compression. If the detected value "
            f"is wrong, set model.context_length to the model's real window."
        )


def is_codex_autoraise_model(provider: str | None, model: str | None) -> bool:
    return (provider or "").strip().lower() == CODEX_PROVIDER and bool(
        _CODEX_AUTORAISE_MODEL.match((model or "").strip())
    )


@dataclass(frozen=True)
class ThresholdDecision:
    """The threshold to use and, when the Codex autoraise changed it, the notice to show once."""

    threshold: float
    raised: bool = False
    notice: str | None = None


def resolve_threshold(
    threshold: float,
    *,
    provider: str | None = None,
    model: str | None = None,
    codex_autoraise: bool = True,
    codex_autoraise_notice: bool = True,
) -> ThresholdDecision:
    """The configured threshold, raised to 0.85 for Codex gpt-5.4/5.5/5.6 when the autoraise is on.

    An autoraise never lowers a higher configured value. The notice (shown once per user account by
    the web layer) explains the raise and how to opt out; it is None when the notice is switched off.
    """
    configured = clamp_threshold(threshold)
    if not codex_autoraise or not is_codex_autoraise_model(provider, model):
        return ThresholdDecision(configured)
    if CODEX_AUTORAISE_THRESHOLD <= configured:
        return ThresholdDecision(configured)
    notice = None
    if codex_autoraise_notice:
        notice = (
            f"Codex {model} caps its context at 272K tokens, so automatic compression was raised to "
            f"{CODEX_AUTORAISE_THRESHOLD:.0%} (from {configured:.0%}). To opt out, turn off "
            f"compression.codex_gpt55_autoraise."
        )
    return ThresholdDecision(CODEX_AUTORAISE_THRESHOLD, raised=True, notice=notice)


@dataclass(frozen=True)
class Threshold:
    """The compression threshold of one conversation's model, and how it was reached."""

    tokens: int
    decision: ThresholdDecision
    lowered_to: int | None = None  # the summariser's window, when it capped the threshold


def threshold_rule(
    context_length: int,
    threshold: Any = DEFAULT_THRESHOLD,
    *,
    max_tokens: Any = None,
    provider: str | None = None,
    model: str | None = None,
    codex_autoraise: bool = True,
    codex_autoraise_notice: bool = True,
    summariser_window: int | None = None,
) -> Threshold:
    """SPEC §4 as one call: the configured share (raised for Codex gpt-5.x), the floor and the output
    reserve of ``compute_threshold_tokens``, then the summariser's window as a cap (SPEC §7.1)."""
    decision = resolve_threshold(threshold, provider=provider, model=model, codex_autoraise=codex_autoraise,
                                 codex_autoraise_notice=codex_autoraise_notice)
    tokens, lowered_to = cap_threshold_tokens(
        compute_threshold_tokens(context_length, decision.threshold, max_tokens), summariser_window)
    return Threshold(tokens, decision, lowered_to)
