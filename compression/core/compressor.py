"""``ContextCompressor``: the built-in engine (SPEC §2–§6), a lossy structured summary of the middle.

Guarantees:
- ``compress`` never mutates its input. ``compressed`` results hold fresh messages (each carrying its
  ``_tokens`` count) with valid tool pairs, exactly one summary, and never more tokens than the
  input; ``aborted``/``noop`` results hold the input list itself.
- The core never talks to the network: the summary comes from the injected
  ``summariser(prompt, budget)``, which returns a str or a ``SummaryResult`` (text + stop_reason)
  and may raise. The whole middle is read: in one call when it fits the summariser's window
  (``summariser_context_length``; when unknown, the 64,000-token minimum an auxiliary model must
  have, so a call never overflows), otherwise in chunks, oldest first,
  each updating the running summary (``chunked``). A summary that stopped at its output cap is a
  failure (``SummaryTruncated``), never accepted half-written. When the summariser fails and a
  ``fallback_summariser`` (the main model) is given, it is tried once and the result says why.
- ``SummariserUnavailable`` (or no summariser at all, or a summariser window that cannot hold a
  chunk) starts a 600 s cooldown, any other failure a 60 s one. By default a failure aborts with the
  input unchanged; ``on_summary_failure="fallback"`` inserts the deterministic local summary
  instead. During a cooldown an automatic ``compress`` returns ``aborted``/``cooldown`` without
  calling the summariser; ``force=True`` ignores the cooldown and the anti-thrash latch.
- Anti-thrash (SPEC §5): one verdict per compaction. It is ineffective when it saved < 10 % of the
  rough message tokens, or, judged on the next real prompt, when that prompt is still at or above
  the threshold (a system prompt and tool schemas near the threshold); an automatic no-op is a
  strike too. After ``ANTI_THRASH_LIMIT`` in a row automatic compression stops, and
  ``blocked_reason()`` says why, until a real prompt below the threshold.
- After assembly, images older than the newest image-bearing user message are replaced by a
  placeholder (``media``).
- Configuration comes through the constructor only: the summariser window lowers
  ``threshold_tokens`` (and the tail budget) when smaller (SPEC §7.1, ``thresholds.threshold_rule``).
- Time comes only from the injected ``clock`` (monotonic) and ``wall_clock`` (persisted cooldowns);
  today's date for the summary prompt is passed to ``compress(today=…)`` by the host.
- Token counts come from a per-message cache honouring stored ``_tokens``: history is tokenised at
  most once per message object, and ``estimate_history_tokens`` is O(new messages) per turn.
- Recall tools (``recall_tools``): given the host's ``recall`` and ``recall_tools=True`` (the
  ``context.recall_tools`` setting), it offers ``context_search`` / ``context_expand`` over
  everything compacted, and each summary's prefix says so unless the note alone would make the
  result bigger than its input (``compressor_recall.py``). Otherwise: no tool, no note.
- ``decorate_summary(text, plan, fits)`` is the hook an engine built on this one overrides to add
  to the summary's body (lcm appends its anchor index); what it adds stays only while the result
  is no bigger than its input.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .assembly import assemble
from .base import (
    PHASE_ASSEMBLING,
    PHASE_PRUNING,
    PHASE_SUMMARISING,
    CompressionPreview,
    CompressionResult,
    ContextEngine,
    ProgressCallback,
)
from .boundaries import find_boundaries
from .compressor_reading import SummaryReading
from .compressor_recall import RecallOffering
from .compressor_run import CompactionPlan, CompressionRun
from .compressor_state import (
    ANTI_THRASH_LIMIT,
    INEFFECTIVE_NO_REDUCTION,
    INEFFECTIVE_NOTHING,
    REASON_NO_REDUCTION,
    REASON_NOTHING,
    REASON_SUMMARY_FAILED,
    TriggerState,
)
from .fallback import build_fallback_summary
from .markers import SUMMARY_KEY, is_summary_message, replace_summary_text, summary_body_of, wrap_summary
from .media import strip_historical_images
from .pruning import prune_old_tool_results
from .recall_tools import Recall
from .summary import summary_budget
from .thresholds import (
    DEFAULT_TARGET_RATIO,
    DEFAULT_THRESHOLD,
    MINIMUM_CONTEXT_LENGTH,
    check_context_length,
    clamp_target_ratio,
    compute_max_summary_tokens,
    compute_tail_token_budget,
    normalise_max_tokens,
    threshold_rule,
)
from .tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TOKENS_KEY,
    MessageTokenCache,
    RunningTotal,
    compute_message_tokens,
    estimate_messages_tokens_rough,
)

log = logging.getLogger(__name__)

Summariser = Callable[[str, int], Any]  # returns a str or a SummaryResult
ON_FAILURE_CHOICES = ("abort", "fallback")
SummaryFits = Callable[[str], bool]


class ContextCompressor(RecallOffering, SummaryReading, TriggerState, ContextEngine):
    """Constructor keywords beyond the contract's: ``summariser_context_length``, the auxiliary
    model's window (for ``auxiliary.provider = auto`` the main model's). It sizes the chunks the
    middle is read in and caps the threshold (SPEC §7.1). None (unknown): chunks are sized for the
    64,000-token minimum an auxiliary model must have, which never overflows but may take more
    calls, and the threshold is kept. ``fallback_summariser``: tried once when ``summariser``
    fails (the main model). ``recall``: the host's search over this conversation
    (``compression.core.recall_tools``); ``recall_tools``: whether to offer the recall tools when
    there is one (``context.recall_tools``)."""

    name = "compressor"
    description = "Built-in lossy compaction: prune old tool output, summarise the middle, keep head and tail."

    def __init__(
        self,
        context_length: int,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        target_ratio: float = DEFAULT_TARGET_RATIO,
        protect_first_n: int = 3,
        protect_last_n: int = 20,
        max_tokens: int | None = None,
        summariser: Summariser | None = None,
        on_summary_failure: str = "abort",
        model: str = "",
        provider: str = "",
        codex_autoraise: bool = True,
        codex_autoraise_notice: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        token_counter: Callable[[Mapping[str, Any]], int] | None = None,
        summariser_context_length: int | None = None,
        fallback_summariser: Summariser | None = None,
        recall: Recall | None = None,
        recall_tools: bool = True,
    ) -> None:
        if on_summary_failure not in ON_FAILURE_CHOICES:
            raise ValueError(f"on_summary_failure must be one of {ON_FAILURE_CHOICES} (got {on_summary_failure!r})")
        self.summariser = summariser
        self.fallback_summariser = fallback_summariser
        self.recall = recall
        self.recall_tools = bool(recall_tools)
        self.configured_summariser_context_length = _positive_int(summariser_context_length)
        self.on_summary_failure = on_summary_failure
        self.protect_first_n = max(0, int(protect_first_n))
        self.protect_last_n = max(1, int(protect_last_n))
        self.target_ratio = clamp_target_ratio(target_ratio)
        self.configured_threshold = threshold
        self.codex_autoraise = codex_autoraise
        self.codex_autoraise_notice = codex_autoraise_notice
        self._clock = clock
        self._wall_clock = wall_clock
        self._tokens = MessageTokenCache(token_counter or compute_message_tokens)
        self._running = RunningTotal(self._tokens)
        self.model = model
        self.provider = provider
        self.max_tokens = normalise_max_tokens(max_tokens)
        self._reset_session_state()
        self._configure(context_length)

    # Configuration ----------------------------------------------------------------------------

    def _configure(self, context_length: int) -> None:
        check_context_length(context_length)
        rule = threshold_rule(
            context_length,
            self.configured_threshold,
            max_tokens=self.max_tokens,
            provider=self.provider,
            model=self.model,
            codex_autoraise=self.codex_autoraise,
            codex_autoraise_notice=self.codex_autoraise_notice,
            summariser_window=self.configured_summariser_context_length,
        )
        self.context_length = context_length
        self.threshold = rule.decision.threshold
        self.summariser_context_length = self.configured_summariser_context_length or min(
            context_length, MINIMUM_CONTEXT_LENGTH
        )
        self.threshold_tokens, self.lowered_to_aux_window = rule.tokens, rule.lowered_to
        self.tail_token_budget = compute_tail_token_budget(self.threshold_tokens, self.target_ratio)
        self.max_summary_tokens = compute_max_summary_tokens(context_length)

    def update_model(
        self,
        model: str | None = None,
        context_length: int | None = None,
        *,
        max_tokens: int | None = None,
        provider: str | None = None,
        summariser_context_length: int | None = None,
        **_: Any,
    ) -> None:
        """Switch model/window; recomputes the budgets and forgets the old model's real-usage calibration."""
        if model is not None:
            self.model = model
        if provider is not None:
            self.provider = provider
        if max_tokens is not None:
            self.max_tokens = normalise_max_tokens(max_tokens)
        if summariser_context_length is not None:
            self.configured_summariser_context_length = _positive_int(summariser_context_length)
        self._configure(context_length or self.context_length)
        self.last_prompt_tokens = 0
        self.last_real_prompt_tokens = 0
        self._awaiting_real_usage = False
        self.ineffective_count = 0
        self.ineffective_reason = ""
        self._verdict_pending = False

    # Token accounting -------------------------------------------------------------------------

    def message_size(self, msg: Mapping[str, Any]) -> int:
        """A message's size in every walk: its stored/cached token count + role-and-keys overhead."""
        return self._tokens(msg) + MESSAGE_OVERHEAD_TOKENS

    def count_messages_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        # message_size summed, without a call per message (20,000 of them in a long history).
        return sum(map(self._tokens, messages)) + MESSAGE_OVERHEAD_TOKENS * len(messages)

    def estimate_history_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Token total of an append-only history: O(new messages) since the previous call."""
        return self._running(messages)

    # Compression ------------------------------------------------------------------------------

    def _find_previous_summary(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        for msg in reversed(messages):
            if is_summary_message(msg):
                return summary_body_of(msg) or None
        return None

    def _plan(self, messages: Sequence[Mapping[str, Any]]) -> CompactionPlan:
        has_summary = any(is_summary_message(m) for m in messages)
        first = self.compression_count == 0 and self.previous_summary is None and not has_summary
        pruned, pruned_count = prune_old_tool_results(
            messages, self.protect_last_n, self.tail_token_budget, token_counter=self.message_size
        )
        bounds = find_boundaries(
            pruned,
            protect_first_n=self.protect_first_n,
            protect_last_n=self.protect_last_n,
            tail_token_budget=self.tail_token_budget,
            first_compression=first,
            token_counter=self.message_size,
        )
        return CompactionPlan(messages, pruned, pruned_count, bounds, first)

    def has_content_to_compress(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        return self._plan(messages).bounds.has_content

    def preview(self, messages: Sequence[Mapping[str, Any]], focus_topic: str | None = None) -> CompressionPreview:
        """What ``compress`` would summarise now (and in how many calls); no summariser call, no state change."""
        plan = self._plan(messages)
        start, end = plan.bounds.start, plan.bounds.end
        turns = plan.middle
        turn_tokens = self.count_messages_tokens(turns)
        budget = summary_budget(turn_tokens, self.max_summary_tokens)
        calls = 0
        if turns:
            reading = self._plan_reading(turns, budget, self._find_previous_summary(messages), focus_topic, None, None)
            calls = len(reading.chunks)
        return CompressionPreview(
            has_content=plan.bounds.has_content,
            messages_before=len(messages),
            tokens_before=self.count_messages_tokens(messages),
            messages_to_summarize=len(turns),
            tokens_to_summarize=turn_tokens,
            head_messages=start,
            tail_messages=len(messages) - end if plan.bounds.has_content else len(messages) - start,
            pruned_count=plan.pruned_count,
            summary_budget=budget,
            reason="" if plan.bounds.has_content else REASON_NOTHING,
            focus_topic=focus_topic,
            first_compression=plan.first_compression,
            summariser_calls=calls,
        )

    def compress(
        self,
        messages: Sequence[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        *,
        on_progress: ProgressCallback | None = None,
        extra_context: str | None = None,
        today: datetime.date | str | None = None,
        **_: Any,
    ) -> CompressionResult:
        """Compact ``messages`` (see the module docstring). ``today``: the user's date for the prompt."""
        run = CompressionRun(messages, self.count_messages_tokens(messages), focus_topic, on_progress)
        refusal = self._automatic_refusal(force)
        if refusal:
            return run.unchanged("aborted", refusal)

        run.progress(PHASE_PRUNING)
        plan = self._plan(messages)
        if not plan.bounds.has_content:
            if not force:
                self._strike(INEFFECTIVE_NOTHING)  # an automatic no-op is a strike (#40803)
            return run.unchanged("noop", REASON_NOTHING, plan.pruned_count)

        run.progress(PHASE_SUMMARISING)
        body, failure = self._summary_body(plan, run, extra_context, today)
        if body is None:
            return run.unchanged("aborted", f"{REASON_SUMMARY_FAILED}: {failure}", plan.pruned_count)

        run.progress(PHASE_ASSEMBLING)
        start, end = plan.bounds.start, plan.bounds.end
        out = self._counted(strip_historical_images(assemble(plan.pruned, start, end, body, fallback=bool(failure))))
        out, body, summary_text = self._dressed(out, body, plan, run.tokens_before)
        tokens_after = self.count_messages_tokens(out)
        if tokens_after > run.tokens_before:
            if not force:
                self._strike(INEFFECTIVE_NO_REDUCTION)
            return run.unchanged("aborted", f"{REASON_NO_REDUCTION}: the summary is larger than the turns it replaces")

        rough_before = estimate_messages_tokens_rough(messages)
        savings = 100.0 * (rough_before - estimate_messages_tokens_rough(out)) / rough_before if rough_before else 0.0
        self._record_compaction(savings, body, fallback=bool(failure))
        log.info(
            "Compressed: %d -> %d messages (~%d -> %d tokens, %.0f%% rough savings; summariser read %d "
            "messages, %d tokens in %d calls)", len(messages), len(out), run.tokens_before, tokens_after, savings,
            run.reading.messages_read, run.reading.tokens_read, run.reading.calls,
        )
        return run.compressed(out, summary_text, plan, tokens_after, fallback_reason=failure)

    def _summary_body(
        self, plan: CompactionPlan, run: CompressionRun, extra_context: str | None, today: datetime.date | str | None
    ) -> tuple[str | None, str]:
        """(the summariser's body, ""); when it failed, (the local fallback summary, or None when a
        failure aborts, and the failure)."""
        turns = plan.middle
        # The summary already in context is the one to update; a remembered one that is not in these
        # messages belongs to another session and must not leak in (#38788).
        previous = self._find_previous_summary(plan.messages)
        budget = summary_budget(self.count_messages_tokens(turns), self.max_summary_tokens)
        reading = self._plan_reading(turns, budget, previous, run.focus_topic, extra_context, today)
        run.reading, failure = self._summarise(
            reading, budget, previous, run.focus_topic, extra_context, today, run.progress
        )
        if not failure:
            return run.reading.body, ""
        self.last_failure = failure
        if self.on_summary_failure != "fallback":
            return None, failure
        return build_fallback_summary(turns, failure, previous), failure

    def decorate_summary(self, text: str, plan: CompactionPlan, fits: SummaryFits) -> str:
        """The summary body as the context carries it: engines override this to add to it (lcm
        appends its anchor index). ``plan`` is this compaction's; ``fits(body)`` says whether a
        body keeps the result no bigger than its input (a decoration that does not fit is dropped).
        The compressor's body stays as the summariser wrote it."""
        return text

    def _dressed(
        self, out: list[dict[str, Any]], body: str, plan: CompactionPlan, tokens_before: int
    ) -> tuple[list[dict[str, Any]], str, str]:
        """(messages, summary body, summary text) with the summary's body decorated
        (``decorate_summary``) and the recall note in its prefix (``recall_note``), when together
        they keep the result no bigger than its input; else ``out`` as assembled."""
        at = next((i for i, m in enumerate(out) if m.get(SUMMARY_KEY)), None)
        plain, note = wrap_summary(body), self.recall_note()
        if at is None:
            return out, body, plain
        tried: dict[str, list[dict[str, Any]] | None] = {}

        def dressed(text: str) -> list[dict[str, Any]] | None:
            if text not in tried:
                replaced = replace_summary_text(out[at], plain, wrap_summary(text, note))
                tried[text] = None if replaced is None else self._counted([*out[:at], replaced, *out[at + 1:]])
            return tried[text]

        def fits(text: str) -> bool:
            candidate = dressed(text)
            return candidate is not None and self.count_messages_tokens(candidate) <= tokens_before

        decorated = self.decorate_summary(body, plan, fits)
        if decorated == body and not note:
            return out, body, plain
        if dressed(decorated) is None:
            log.warning("the summary message has an unexpected shape; it is left as assembled")
        candidate = dressed(decorated)
        if candidate is None or not fits(decorated):
            return out, body, plain
        return candidate, decorated, wrap_summary(decorated, note)

    def _counted(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with a stored token count on each (the list is fresh: it is changed in place)."""
        for i, msg in enumerate(messages):
            if TOKENS_KEY not in msg:
                messages[i] = {**msg, TOKENS_KEY: self._tokens(msg)}
        return messages

    # Status and persistence -------------------------------------------------------------------

    def get_status(self) -> dict[str, Any]:
        status = super().get_status()
        status.update(
            threshold=self.threshold,
            tail_token_budget=self.tail_token_budget,
            max_summary_tokens=self.max_summary_tokens,
            ineffective_count=self.ineffective_count,
            anti_thrash_limit=ANTI_THRASH_LIMIT,
            summariser_context_length=self.summariser_context_length,
            lowered_to_aux_window=self.lowered_to_aux_window,
            cooldown_remaining=self.cooldown_remaining(),
            blocked_reason=self.blocked_reason(),
            last_failure=self.last_failure,
        )
        return status

def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value
