"""What the built-in compressor remembers between turns, and the rules that read it (SPEC §5):
real prompt sizes from the provider, the preflight's deferral to them, the cooldown after a failed
summary, the anti-thrash verdict on each compaction, and the state's persisted form.

`TriggerState` is a mixin of `ContextCompressor`; it expects the engine's `threshold_tokens` and
its injected `_clock` (monotonic) and `_wall_clock` (for the persisted cooldown).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from .usage import prompt_tokens_of

TRANSIENT_COOLDOWN_SECONDS = 60
NO_AUX_MODEL_COOLDOWN_SECONDS = 600
INEFFECTIVE_SAVINGS_PCT = 10.0
# SPEC §5: this many ineffective compactions in a row stop automatic compression. The one
# definition: the host's pages and metrics import it.
ANTI_THRASH_LIMIT = 2

# Why the last compaction was judged ineffective (persisted, so the page can say it).
INEFFECTIVE_LOW_SAVINGS = "low_savings"
INEFFECTIVE_STILL_OVER = "still_over_threshold"
INEFFECTIVE_NOTHING = "nothing_to_compress"
INEFFECTIVE_NO_REDUCTION = "no_reduction"

REASON_COOLDOWN = "cooldown"
REASON_INEFFECTIVE = "ineffective"
REASON_NOTHING = "nothing to compress"
REASON_NO_REDUCTION = "no reduction"
REASON_SUMMARY_FAILED = "summary failed"  # prefix of the reason; the failure follows after ": "
NO_AUX_MODEL = "no auxiliary model configured"
STATE_VERSION = 2
# `last_prompt_tokens` from a compaction until the next response reports real usage (SPEC §3.2):
# the context was rebuilt and its real size is not known yet. The one definition: the host reads
# it too (the loop's cache hints, the import check).
AWAITING_USAGE = -1


class TriggerState:
    threshold_tokens: int
    _clock: Callable[[], float]
    _wall_clock: Callable[[], float]

    def _reset_session_state(self) -> None:
        self.compression_count = 0
        self.last_prompt_tokens = 0
        self.last_real_prompt_tokens = 0
        self.previous_summary: str | None = None
        self.ineffective_count = 0
        self.ineffective_reason = ""
        self._verdict_pending = False  # a compaction awaits its verdict from the next real prompt
        self.last_failure: str | None = None
        self._cooldown_deadline = 0.0
        self._cooldown_reason = ""
        self._awaiting_real_usage = False

    def on_session_reset(self) -> None:
        self._reset_session_state()

    def update_from_response(self, usage: Any) -> None:
        prompt = prompt_tokens_of(usage)
        self._awaiting_real_usage = False
        verdict_pending, self._verdict_pending = self._verdict_pending, False  # consumed either way
        if not prompt:
            self.last_prompt_tokens = 0  # no real usage: callers project from the counted request
            return
        self.last_prompt_tokens = prompt
        self.last_real_prompt_tokens = prompt
        if prompt < self.threshold_tokens:
            self.ineffective_count = 0  # a fitting real prompt re-opens automatic compression
            self.ineffective_reason = ""
        elif verdict_pending:
            # The compaction did not bring the real prompt under the threshold: what is left is
            # mostly the system prompt and tool schemas, which no compaction can shrink.
            self._strike(INEFFECTIVE_STILL_OVER)

    def _strike(self, why: str) -> None:
        self.ineffective_count += 1
        self.ineffective_reason = why

    def cooldown_remaining(self) -> float:
        return max(0.0, self._cooldown_deadline - self._clock())

    def blocked_reason(self) -> str | None:
        """Why automatic compression is paused right now, in words for the user, or None."""
        remaining = self.cooldown_remaining()
        if remaining > 0:
            return (
                f"Compression is cooling down for {math.ceil(remaining)} s after a failed summary "
                f"({self._cooldown_reason or 'summary failed'}). Use /compress to retry now."
            )
        if self.ineffective_count >= ANTI_THRASH_LIMIT:
            if self.ineffective_reason == INEFFECTIVE_STILL_OVER:
                return (
                    f"Automatic compression is paused: after the last {self.ineffective_count} compressions "
                    f"the prompt was still over the compression threshold ({self.threshold_tokens:,} "
                    "tokens), so the system prompt and tool schemas alone take up most of it. Raise "
                    "compression.threshold, use a model with a larger window, or start a new conversation; "
                    "/compress still runs on request."
                )
            return (
                "Automatic compression is paused: the last compressions saved less than 10 % of the "
                "context. Try /compress <topic> to focus the summary, or start a new conversation."
            )
        return None

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        tokens = self.last_prompt_tokens if prompt_tokens is None else prompt_tokens
        # AWAITING_USAGE (compression just ran) counts as 0 until real usage arrives.
        return max(0, tokens) >= self.threshold_tokens and self.blocked_reason() is None

    def should_defer_preflight_to_real_usage(self, tokens: int) -> bool:
        """Preflight rule of SPEC §5.2: right after a compaction, wait for the next real prompt."""
        awaiting = self._awaiting_real_usage or self.last_prompt_tokens == AWAITING_USAGE
        return tokens >= self.threshold_tokens and awaiting

    def _automatic_refusal(self, force: bool) -> str | None:
        """Why ``compress`` must not run now (the cooldown, the anti-thrash latch), or None;
        ``force`` ignores both and ends the cooldown."""
        if force:
            self._cooldown_deadline = 0.0
            return None
        if self.cooldown_remaining() > 0:
            return REASON_COOLDOWN
        if self.ineffective_count >= ANTI_THRASH_LIMIT:
            return REASON_INEFFECTIVE
        return None

    def _record_compaction(self, savings_pct: float, body: str, fallback: bool) -> None:
        """A compaction happened: its verdict (now when it saved too little, else on the next real
        prompt), the count, the summary, and the wait for real usage."""
        if savings_pct < INEFFECTIVE_SAVINGS_PCT:
            self._strike(INEFFECTIVE_LOW_SAVINGS)
            self._verdict_pending = False
        else:
            self._verdict_pending = True
        self.compression_count += 1
        self.previous_summary = body
        if not fallback:
            self.last_failure = None
            self._cooldown_deadline = 0.0
        self.last_prompt_tokens = AWAITING_USAGE
        self._awaiting_real_usage = True

    def _start_cooldown(self, seconds: float, reason: str) -> None:
        self._cooldown_deadline = self._clock() + seconds
        self._cooldown_reason = reason

    def export_state(self) -> dict[str, Any]:
        """Per-session state for the web layer to persist; the cooldown as wall-clock seconds."""
        remaining = self.cooldown_remaining()
        return {
            "version": STATE_VERSION,
            "compression_count": self.compression_count,
            "previous_summary": self.previous_summary,
            "cooldown_until": self._wall_clock() + remaining if remaining > 0 else None,
            "cooldown_reason": self._cooldown_reason if remaining > 0 else "",
            "ineffective_count": self.ineffective_count,
            "ineffective_reason": self.ineffective_reason,
            "verdict_pending": self._verdict_pending,
            "last_prompt_tokens": self.last_prompt_tokens,
            "last_real_prompt_tokens": self.last_real_prompt_tokens,
            "awaiting_real_usage": self._awaiting_real_usage,
            "last_failure": self.last_failure,
        }

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Restore what ``export_state`` produced (missing keys keep their defaults)."""
        self.compression_count = int(state.get("compression_count") or 0)
        self.previous_summary = state.get("previous_summary") or None
        self.ineffective_count = int(state.get("ineffective_count") or 0)
        self.ineffective_reason = str(state.get("ineffective_reason") or "")
        self._verdict_pending = bool(state.get("verdict_pending"))
        self.last_prompt_tokens = int(state.get("last_prompt_tokens") or 0)
        self.last_real_prompt_tokens = int(state.get("last_real_prompt_tokens") or 0)
        self._awaiting_real_usage = bool(state.get("awaiting_real_usage"))
        self.last_failure = state.get("last_failure")
        until = state.get("cooldown_until")
        if until:
            remaining = float(until) - self._wall_clock()
            if remaining > 0:
                self._cooldown_deadline = self._clock() + remaining
                self._cooldown_reason = str(state.get("cooldown_reason") or "")
