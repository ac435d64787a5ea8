"""Trigger rules that do not belong to one engine instance (SPEC §5.1 and §5.2).

Guarantees, as pure functions of the numbers they are given:
- ``should_run_hygiene``: gateway hygiene fires at a fixed 85 % of the window (ignoring
  ``compression.threshold``) or at the hard message limit, only with ≥ 4 messages and compression
  enabled. Tokens are the last real prompt count when known (> 0), else the rough estimate.
- ``preflight_gate``: the cheap check before the rough request estimate is computed.
- ``should_defer_preflight``: defer to real usage right after a compression (until real usage
  arrives), or while the last real prompt fit and the rough estimate grew by no more than
  ``max(4096, 5 % of threshold)`` since.
- ``made_progress``: what "a pass made progress" means for the 3-pass preflight and error recovery.
"""

from __future__ import annotations

from dataclasses import dataclass

HYGIENE_PERCENT = 85  # of the window (SPEC §5.1), whatever compression.threshold says
HYGIENE_MIN_MESSAGES = 4
DEFAULT_HARD_MESSAGE_LIMIT = 5_000
DEFER_MIN_GROWTH = 4_096
DEFER_GROWTH_SHARE = 0.05
PROGRESS_TOKEN_RATIO = 0.95
MAX_PREFLIGHT_PASSES = 3


@dataclass(frozen=True)
class HygieneDecision:
    fire: bool
    tokens: int
    source: str  # "actual" (last real prompt) or "estimated" (rough)
    threshold: int
    reason: str

    def __bool__(self) -> bool:
        return self.fire


def hygiene_threshold(context_length: int) -> int:
    """The smallest integer token count that is ≥ 85 % of the window (exact integer arithmetic)."""
    return -(-context_length * HYGIENE_PERCENT // 100)


def hygiene_decision(
    *,
    message_count: int,
    context_length: int,
    last_prompt_tokens: int = 0,
    rough_tokens: int = 0,
    enabled: bool = True,
    hard_message_limit: int = DEFAULT_HARD_MESSAGE_LIMIT,
) -> HygieneDecision:
    """Whether gateway hygiene compacts before the turn, with the numbers behind the decision."""
    threshold = hygiene_threshold(context_length)
    if last_prompt_tokens > 0:
        tokens, source = last_prompt_tokens, "actual"
    else:
        tokens, source = max(0, rough_tokens), "estimated"

    def decided(fire: bool, reason: str) -> HygieneDecision:
        return HygieneDecision(fire, tokens, source, threshold, reason)

    if not enabled:
        return decided(False, "compression disabled")
    if message_count < HYGIENE_MIN_MESSAGES:
        return decided(False, f"fewer than {HYGIENE_MIN_MESSAGES} messages")
    if tokens >= threshold:
        return decided(True, f"{tokens:,} {source} tokens >= 85% of {context_length:,} ({threshold:,})")
    if message_count >= max(HYGIENE_MIN_MESSAGES, hard_message_limit):
        return decided(True, f"{message_count:,} messages >= hard limit {hard_message_limit:,}")
    return decided(False, "under the hygiene threshold")


def should_run_hygiene(
    *,
    message_count: int,
    context_length: int,
    last_prompt_tokens: int = 0,
    rough_tokens: int = 0,
    enabled: bool = True,
    hard_message_limit: int = DEFAULT_HARD_MESSAGE_LIMIT,
) -> bool:
    return hygiene_decision(
        message_count=message_count,
        context_length=context_length,
        last_prompt_tokens=last_prompt_tokens,
        rough_tokens=rough_tokens,
        enabled=enabled,
        hard_message_limit=hard_message_limit,
    ).fire


def preflight_gate(
    *, message_count: int, rough_message_tokens: int, threshold_tokens: int, protect_first_n: int, protect_last_n: int
) -> bool:
    """Cheap gate: enough messages to have a middle, or the messages alone already reach the threshold."""
    return message_count > protect_first_n + protect_last_n + 1 or rough_message_tokens >= threshold_tokens


def defer_growth_allowance(threshold_tokens: int) -> int:
    return max(DEFER_MIN_GROWTH, int(threshold_tokens * DEFER_GROWTH_SHARE))


def should_defer_preflight(
    rough_tokens: int,
    *,
    threshold_tokens: int,
    awaiting_real_usage: bool,
    last_real_prompt_tokens: int,
    rough_baseline: int,
) -> bool:
    """True when the preflight should trust the provider's last real count over the rough estimate.

    ``rough_baseline`` is the rough estimate of the request whose real prompt fit under the threshold.
    """
    if rough_tokens < threshold_tokens:
        return False
    if awaiting_real_usage:
        return True
    if last_real_prompt_tokens <= 0 or last_real_prompt_tokens >= threshold_tokens or rough_baseline <= 0:
        return False
    return rough_tokens - rough_baseline <= defer_growth_allowance(threshold_tokens)


def made_progress(messages_before: int, messages_after: int, tokens_before: int, tokens_after: int) -> bool:
    """A pass made progress when it removed messages or cut tokens below 95 % of before."""
    return messages_after < messages_before or tokens_after < tokens_before * PROGRESS_TOKEN_RATIO
