"""The pluggable context-engine contract (SPEC §2): ``ContextEngine`` and its result types.

Guarantees: an engine needs only ``name``, ``update_from_response``, ``should_compress`` and
``compress``; every other member the host uses exists here with a working default (token counts,
the preflight hooks, ``preview``, ``blocked_reason``, state export), so a tiny engine is a few
lines and still runs every turn. Configuration arrives through the constructor: the default
``__init__`` derives ``threshold_tokens`` and ``tail_token_budget`` from the window (SPEC §4) and
applies the summariser-window and per-session caps. Results are frozen dataclasses; on
``aborted``/``noop`` a result's ``messages`` is the caller's input list.

Progress: ``compress`` reports phases through ``on_progress(phase)``: ``"pruning"``,
``"summarising"``, then, when the middle is read in several summariser calls, ``"summarising k/n"``
before each call (``chunk_phase``/``parse_chunk_phase``), then ``"assembling"``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .thresholds import DEFAULT_TARGET_RATIO, DEFAULT_THRESHOLD, compute_tail_token_budget, threshold_rule
from .tokens import MESSAGE_OVERHEAD_TOKENS, MessageTokenCache, RunningTotal

Status = Literal["compressed", "aborted", "noop"]
ProgressCallback = Callable[[str], None]  # called with "pruning", "summarising", "summarising k/n", "assembling"

PHASE_PRUNING = "pruning"
PHASE_SUMMARISING = "summarising"
PHASE_ASSEMBLING = "assembling"
_CHUNK_PHASE = re.compile(rf"^{PHASE_SUMMARISING} (\d+)/(\d+)$")


def chunk_phase(chunk: int, chunks: int) -> str:
    """The progress phase for summariser call ``chunk`` of ``chunks``, e.g. ``"summarising 2/5"``."""
    return f"{PHASE_SUMMARISING} {chunk}/{chunks}"


def parse_chunk_phase(phase: str) -> tuple[int, int] | None:
    """``(chunk, chunks)`` of a ``chunk_phase`` string, or None for any other phase."""
    match = _CHUNK_PHASE.match(phase or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


@dataclass(frozen=True)
class CompressionResult:
    messages: Sequence[dict[str, Any]]  # an unchanged result holds the caller's own sequence
    status: Status
    summary: str | None = None
    pruned_count: int = 0
    summarized_count: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str = ""
    messages_before: int = 0
    messages_after: int = 0
    fallback_used: bool = False
    focus_topic: str | None = None
    # What the summariser actually read: messages and tokens of the rendered middle, and the calls
    # it took (failed calls included). A model-written summary has messages_read == summarized_count;
    # a local fallback summary or an abort reports what was read before the failure.
    messages_read: int = 0
    tokens_read: int = 0
    summariser_calls: int = 0
    # Set when the auxiliary summariser failed and the fallback summariser (the main model) wrote
    # the summary: the auxiliary failure, for a notice to staff that the route is misconfigured.
    summariser_fallback_reason: str = ""

    @property
    def compressed(self) -> bool:
        return self.status == "compressed"


@dataclass(frozen=True)
class CompressionPreview:
    """What ``compress`` would do now, computed without calling the summariser or changing state."""

    has_content: bool
    messages_before: int
    tokens_before: int
    messages_to_summarize: int
    tokens_to_summarize: int
    head_messages: int
    tail_messages: int
    pruned_count: int
    summary_budget: int
    reason: str = ""
    focus_topic: str | None = None
    first_compression: bool = True
    summariser_calls: int = 0


class ContextEngine(ABC):
    """Decides when and how a session's context is compacted; one instance per session."""

    name: str = ""
    description: str = ""

    # Token state the host reads directly. last_prompt_tokens: AWAITING_USAGE (compressor_state) =
    # compression just ran, waiting for real usage; 0 = no real usage yet (use the rough estimate).
    last_prompt_tokens: int = 0
    threshold_tokens: int = 0
    context_length: int = 0
    compression_count: int = 0
    tail_token_budget: int = 0
    # The cap the threshold was lowered to (the summariser's window or the session's stored
    # threshold), or None; the gauge says so.
    lowered_to_aux_window: int | None = None

    def __init__(
        self,
        context_length: int = 0,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        target_ratio: float = DEFAULT_TARGET_RATIO,
        max_tokens: int | None = None,
        summariser_context_length: int | None = None,
        **kwargs: Any,
    ) -> None:
        """The host's configuration (the same keywords the built-in takes; unknown ones are ignored)."""
        self.context_length = int(context_length or 0)
        if self.context_length > 0:
            rule = threshold_rule(
                self.context_length, threshold, max_tokens=max_tokens, provider=kwargs.get("provider"),
                model=kwargs.get("model"), codex_autoraise=kwargs.get("codex_autoraise", True),
                summariser_window=summariser_context_length,
            )
            self.threshold_tokens, self.lowered_to_aux_window = rule.tokens, rule.lowered_to
            self.tail_token_budget = compute_tail_token_budget(self.threshold_tokens, target_ratio)

    @abstractmethod
    def update_from_response(self, usage: Any) -> None:
        """Called after every model call with the (normalised or raw) usage."""

    @abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """True when an automatic compression should run now."""

    @abstractmethod
    def compress(
        self,
        messages: Sequence[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        **kwargs: Any,
    ) -> CompressionResult:
        """Compact ``messages``; never mutates them. ``kwargs`` may carry ``on_progress`` and ``extra_context``."""

    # Optional hooks -------------------------------------------------------------------------

    def count_messages_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Token total of ``messages``: stored ``_tokens`` counts (else tiktoken) + per-message overhead."""
        return sum(self._token_cache()(m) + MESSAGE_OVERHEAD_TOKENS for m in messages)

    def estimate_history_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Token total of an append-only history: O(new messages) since the previous call."""
        running = self.__dict__.get("_base_running_total")
        if running is None:
            running = self.__dict__["_base_running_total"] = RunningTotal(self._token_cache())
        return running(messages)

    def _token_cache(self) -> MessageTokenCache:
        cache = self.__dict__.get("_base_token_cache")
        if cache is None:
            cache = self.__dict__["_base_token_cache"] = MessageTokenCache()
        return cache

    def preview(self, messages: Sequence[Mapping[str, Any]], focus_topic: str | None = None) -> CompressionPreview:
        """What ``compress`` would do; an engine without a preview says so instead of guessing."""
        return CompressionPreview(
            has_content=False,
            messages_before=len(messages),
            tokens_before=self.count_messages_tokens(messages),
            messages_to_summarize=0,
            tokens_to_summarize=0,
            head_messages=len(messages),
            tail_messages=0,
            pruned_count=0,
            summary_budget=0,
            reason=f"the {self.name or type(self).__name__} engine offers no preview",
            focus_topic=focus_topic,
        )

    def blocked_reason(self) -> str | None:
        """Why automatic compression is paused right now, in words for the user, or None."""
        return None

    def is_available(self) -> bool:
        return True

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def handle_tool_call(self, name: str, args: dict[str, Any], **ctx: Any) -> str:
        return json.dumps({"error": f"Unknown context engine tool: {name}"})

    def on_session_start(self, session_id: str, **kwargs: Any) -> None:
        return None

    def on_session_end(self, session_id: str, messages: Sequence[dict[str, Any]]) -> None:
        return None

    def on_session_reset(self) -> None:
        self.last_prompt_tokens = 0
        self.compression_count = 0

    def has_content_to_compress(self, messages: Sequence[dict[str, Any]]) -> bool:
        return True

    def should_defer_preflight_to_real_usage(self, tokens: int) -> bool:
        return False

    def update_model(self, model: str | None = None, context_length: int | None = None, **kwargs: Any) -> None:
        if context_length:
            self.context_length = context_length

    def get_status(self) -> dict[str, Any]:
        last = max(0, self.last_prompt_tokens)
        usage = min(100.0, last / self.context_length * 100) if self.context_length else 0.0
        return {
            "engine": self.name,
            "last_prompt_tokens": last,
            "threshold_tokens": self.threshold_tokens,
            "context_length": self.context_length,
            "usage_percent": usage,
            "compression_count": self.compression_count,
        }

    def export_state(self) -> dict[str, Any]:
        return {"last_prompt_tokens": self.last_prompt_tokens, "compression_count": self.compression_count}

    def load_state(self, state: dict[str, Any]) -> None:
        self.last_prompt_tokens = int(state.get("last_prompt_tokens", 0) or 0)
        self.compression_count = int(state.get("compression_count", 0) or 0)
