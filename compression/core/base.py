"""The pluggable context-engine contract (SPEC §2): ``ContextEngine`` and its result types.

Guarantees: an engine needs only ``name``, ``update_from_response``, ``should_compress`` and
``compress``; every optional hook has a harmless default, so a tiny engine is a few lines. Results
are frozen dataclasses; on ``aborted``/``noop`` a result's ``messages`` is the caller's input list.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["compressed", "aborted", "noop"]
ProgressCallback = Callable[[str], None]  # called with "pruning", "summarising", "assembling"

PHASE_PRUNING = "pruning"
PHASE_SUMMARISING = "summarising"
PHASE_ASSEMBLING = "assembling"


@dataclass(frozen=True)
class CompressionResult:
    messages: list[dict[str, Any]]
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

    @property
    def compressed(self) -> bool:
        return self.status == "compressed"

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after


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
    summarized_indices: tuple[int, int] = field(default=(0, 0))


class ContextEngine(ABC):
    """Decides when and how a session's context is compacted; one instance per session."""

    name: str = ""
    description: str = ""

    # Token state the host reads directly. last_prompt_tokens: -1 = compression just ran, waiting for
    # real usage; 0 = no real usage yet (use the rough estimate).
    last_prompt_tokens: int = 0
    threshold_tokens: int = 0
    context_length: int = 0
    compression_count: int = 0

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

    def should_defer_preflight_to_real_usage(self, rough_tokens: int) -> bool:
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
