"""Trigger rules that do not belong to one engine instance (SPEC §5.1 and §5.2).

Guarantees, as pure functions of the numbers they are given:
- ``hygiene_decision``: gateway hygiene fires at a fixed 85 % of the window (ignoring
  ``compression.threshold``) or at the hard message limit, only with ≥ 4 messages and compression
  enabled. Tokens are the projected next request (``projection``, SPEC §3.4).
- ``preflight_gate``: the cheap check before the projection is computed.
- ``made_progress``: what "a pass made progress" means for the 3-pass preflight and error recovery.
"""

from __future__ import annotations

from dataclasses import dataclass

HYGIENE_PERCENT = 85  # of the window (SPEC §5.1), whatever compression.threshold says
HYGIENE_MIN_MESSAGES = 4
DEFAULT_HARD_MESSAGE_LIMIT = 5_000
PROGRESS_TOKEN_RATIO = 0.95
MAX_PREFLIGHT_PASSES = 3


@dataclass(frozen=True)
class HygieneDecision:
    fire: bool
    tokens: int
    source: str  # what ``tokens`` is: "projected" (SPEC §3.4)
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
    tokens: int = 0,
    source: str = "projected",
    enabled: bool = True,
    hard_message_limit: int = DEFAULT_HARD_MESSAGE_LIMIT,
) -> HygieneDecision:
    """Whether gateway hygiene compacts before the turn, with the numbers behind the decision.
    ``tokens`` is the projected next request (SPEC §3.4)."""
    threshold = hygiene_threshold(context_length)
    tokens = max(0, int(tokens))

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


def preflight_gate(
    *, message_count: int, rough_message_tokens: int, threshold_tokens: int, protect_first_n: int, protect_last_n: int
) -> bool:
    """Cheap gate: enough messages to have a middle, or the messages alone already reach the threshold."""
    return message_count > protect_first_n + protect_last_n + 1 or rough_message_tokens >= threshold_tokens


def made_progress(messages_before: int, messages_after: int, tokens_before: int, tokens_after: int) -> bool:
    """A pass made progress when it removed messages or cut tokens below 95 % of before."""
    return messages_after < messages_before or tokens_after < tokens_before * PROGRESS_TOKEN_RATIO
