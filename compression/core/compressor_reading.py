"""How the built-in compressor reads the middle with its summariser (SPEC §6, §7.1): plan the
reading in chunks that fit the summariser's window, run it (falling back to the main model once),
and turn a failure into the cooldown it calls for (600 s when no summariser can be reached, 60 s
for anything transient).

`SummaryReading` is a mixin of `ContextCompressor`; it expects the engine's `summariser`,
`fallback_summariser`, `summariser_context_length` and `_start_cooldown`.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .base import chunk_phase
from .chunked import SummaryPlan, SummaryRun, plan_summary, run_summary
from .compressor_state import NO_AUX_MODEL, NO_AUX_MODEL_COOLDOWN_SECONDS, TRANSIENT_COOLDOWN_SECONDS
from .summary import SummariserUnavailable

log = logging.getLogger("compression.core.compressor")


class SummaryReading:
    summariser: Any
    fallback_summariser: Any
    summariser_context_length: int
    _start_cooldown: Callable[[float, str], None]

    def _plan_reading(
        self,
        turns: Sequence[Mapping[str, Any]],
        budget: int,
        previous: str | None,
        focus_topic: str | None,
        extra_context: str | None,
        today: datetime.date | str | None,
    ) -> SummaryPlan:
        return plan_summary(
            turns, window=self.summariser_context_length, budget=budget, previous_summary=previous,
            focus_topic=focus_topic, extra_context=extra_context, today=today,
        )

    def _summarise(
        self,
        reading: SummaryPlan,
        budget: int,
        previous: str | None,
        focus_topic: str | None,
        extra_context: str | None,
        today: datetime.date | str | None,
        progress: Callable[[str], None],
    ) -> tuple[SummaryRun, str]:
        """The run over every chunk and ``""`` on success, or the failure reason (with its cooldown)."""
        if self.summariser is None and self.fallback_summariser is None:
            self._start_cooldown(NO_AUX_MODEL_COOLDOWN_SECONDS, NO_AUX_MODEL)
            return SummaryRun(None, SummariserUnavailable(NO_AUX_MODEL), 0, 0, 0), NO_AUX_MODEL
        if not reading.feasible:
            reason = reading.infeasible_reason(budget)
            self._start_cooldown(NO_AUX_MODEL_COOLDOWN_SECONDS, reason)
            return SummaryRun(None, SummariserUnavailable(reason), 0, 0, 0), reason

        def on_chunk(k: int, n: int) -> None:
            if n > 1:
                progress(chunk_phase(k, n))

        run = run_summary(
            reading, (self.summariser, self.fallback_summariser), budget=budget, previous_summary=previous,
            focus_topic=focus_topic, extra_context=extra_context, today=today, on_chunk=on_chunk,
        )
        if run.fallback_used:
            log.warning("The auxiliary summariser failed (%s); the fallback summariser was used", run.primary_failure)
        if run.error is None:
            return run, ""
        exc = run.error
        if isinstance(exc, SummariserUnavailable):
            reason = str(exc) or NO_AUX_MODEL
            self._start_cooldown(NO_AUX_MODEL_COOLDOWN_SECONDS, reason)
        else:
            reason = f"{type(exc).__name__}: {exc}"[:300]
            self._start_cooldown(TRANSIENT_COOLDOWN_SECONDS, reason)
        return run, reason
