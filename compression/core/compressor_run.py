"""One call of ``ContextCompressor.compress``: the plan it follows and the results it can end with.

``CompactionPlan`` is decided before the summariser runs (what is pruned, what the summary
replaces); engines that decorate the summary read it (``ContextCompressor.decorate_summary``).
``CompressionRun`` holds the call's input and what its summariser did so far, reports progress,
and builds the result: ``unchanged`` (the caller's own messages, for ``aborted``/``noop``) or
``compressed``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .base import CompressionResult, ProgressCallback, Status
from .boundaries import Boundaries
from .chunked import SummaryRun

log = logging.getLogger("compression.core.compressor")


@dataclass(frozen=True)
class CompactionPlan:
    """``messages`` is the input; ``pruned`` is it with old tool output pruned, and the summary
    replaces ``pruned[bounds.start:bounds.end]`` (``middle``)."""

    messages: Sequence[Mapping[str, Any]]
    pruned: list[dict[str, Any]]
    pruned_count: int
    bounds: Boundaries
    first_compression: bool

    @property
    def middle(self) -> list[dict[str, Any]]:
        return self.pruned[self.bounds.start:self.bounds.end] if self.bounds.has_content else []


@dataclass
class CompressionRun:
    messages: Sequence[dict[str, Any]]
    tokens_before: int
    focus_topic: str | None
    on_progress: ProgressCallback | None = None
    reading: SummaryRun = field(default_factory=lambda: SummaryRun(None, None, 0, 0, 0))

    def progress(self, phase: str) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(phase)
        except Exception:  # a broken progress broadcast must not break compression
            log.exception("compression progress callback failed")

    def unchanged(self, status: Status, reason: str, pruned: int = 0) -> CompressionResult:
        return CompressionResult(
            messages=self.messages,  # the caller's own sequence, untouched
            status=status,
            pruned_count=pruned,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_before,
            reason=reason,
            messages_before=len(self.messages),
            messages_after=len(self.messages),
            focus_topic=self.focus_topic,
            messages_read=self.reading.messages_read,
            tokens_read=self.reading.tokens_read,
            summariser_calls=self.reading.calls,
            summariser_fallback_reason=self.reading.primary_failure,
        )

    def compressed(self, out: list[dict[str, Any]], summary: str, plan: CompactionPlan, tokens_after: int,
                   fallback_reason: str) -> CompressionResult:
        """``fallback_reason``: why the local fallback summary was written ("" for the summariser's)."""
        return CompressionResult(
            messages=out,
            status="compressed",
            summary=summary,
            pruned_count=plan.pruned_count,
            summarized_count=len(plan.middle),
            tokens_before=self.tokens_before,
            tokens_after=tokens_after,
            reason=f"fallback summary ({fallback_reason})" if fallback_reason else "",
            messages_before=len(self.messages),
            messages_after=len(out),
            fallback_used=bool(fallback_reason),
            focus_topic=self.focus_topic,
            messages_read=self.reading.messages_read,
            tokens_read=self.reading.tokens_read,
            summariser_calls=self.reading.calls,
            summariser_fallback_reason=self.reading.primary_failure,
        )
