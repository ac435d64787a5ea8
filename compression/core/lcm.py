"""``LcmEngine`` (``context.engine = "lcm"``): lossless context management. It compacts exactly like
the built-in compressor and, in addition, keeps everything compacted within the agent's reach:

- each summary ends with an anchor index (``anchors``): exact strings extracted mechanically from
  the compacted span, each with the reference of the message it came from. The index of the
  previous summary is carried forward, so nothing indexed once is forgotten while the budget
  (``anchor_index_tokens``; by default 20 % of the window, 500–16,000 tokens) holds it;
- the recall tools (``recall_tools``), ``context_search(query, limit)`` and
  ``context_expand(ref, before, after)``, answered through the host's injected ``recall``. They
  define this engine, so it offers them whatever ``context.recall_tools`` says;
- the summary's prefix says both tools exist and what the index is (``RECALL_NOTE``).

Guarantees: the compressor's (input never mutated, exactly one summary, never more tokens than the
input: the index shrinks, and disappears if it must, to keep that). The summariser only ever sees
the previous summary's prose, never its tool note or index. Pure: the database stays behind
``recall`` (an object with ``search(query, limit)``, ``expand(ref, before, after)`` and
``context_refs()``, the ``(role, ref)`` of each live message after the system prompt); without
it the tools answer with an error and anchors carry no reference.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from . import recall_tools
from .anchors import Anchor, extract_anchors, fit_anchors, merge_anchors, parse_index, render_index, split_index
from .compressor import ContextCompressor, SummaryFits
from .compressor_run import CompactionPlan
from .markers import LCM_RECALL_NOTE, is_summary_message, strip_recall_note, summary_body_of, wrap_summary
from .recall_tools import EXPAND_DEFAULT, EXPAND_MAX, EXPAND_TOOL, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SEARCH_TOOL

log = logging.getLogger(__name__)

__all__ = [
    "EXPAND_DEFAULT", "EXPAND_MAX", "EXPAND_TOOL", "RECALL_NOTE", "SEARCH_DEFAULT_LIMIT", "SEARCH_MAX_LIMIT",
    "SEARCH_TOOL", "TOOL_SCHEMAS", "LcmEngine", "Recall", "lcm_summary_text", "split_lcm_body",
]

# The index's default budget. It is written into the summary, and a summary never outgrows its
# input, so the index takes the place of what it indexes and rides in the cached prefix; past about
# a fifth of the window that rule, not the budget, sets its size. On an independent exam (README,
# *Recall on an independent exam*; 64k window, 3 seeds) closed-book recall was 67.1 % at 12 % and
# 73.2 % at 20 % and at 25 %, the context at most 24.2 % / 23.8 % / 23.8 % of the uncompacted
# conversation (with the anchor rules before: 23.2 % at 4 %, about 160 values a conversation).
INDEX_WINDOW_SHARE = 0.20
INDEX_MIN_TOKENS, INDEX_MAX_TOKENS = 500, 16_000
RECALL_NOTE = LCM_RECALL_NOTE
TOOL_SCHEMAS = recall_tools.TOOL_SCHEMAS

_COMPRESSOR_PARAMS = frozenset(inspect.signature(ContextCompressor.__init__).parameters) - {"self"}


class Recall(recall_tools.Recall, Protocol):
    def context_refs(self) -> Sequence[tuple[str, str | None]]: ...


def _with_index(prose: str, index: str) -> str:
    return f"{prose.strip()}\n\n{index}" if index else prose


def lcm_summary_text(prose: str, index: str) -> str:
    """The full summary text: the prefix with the tools' note, the prose, the index, the end marker."""
    return wrap_summary(_with_index(prose, index), RECALL_NOTE)


def split_lcm_body(body: str) -> tuple[str, str]:
    """(prose, index section) of a summary body written by this engine (or any other), without a
    recall note (any engine's) that leads it."""
    return split_index(strip_recall_note(body.strip()))


class LcmEngine(ContextCompressor):
    recall: Recall | None  # the compressor's, with the references anchors need

    name = "lcm"
    description = ("The built-in compressor plus an anchor index in every summary and context_search / "
                   "context_expand tools over everything compacted.")

    def __init__(self, context_length: int, *, recall: Recall | None = None, anchor_index_tokens: int | None = None,
                 **kwargs: Any) -> None:
        """``recall``: the host's search over this conversation (see the module docstring).
        ``anchor_index_tokens``: the index's budget. Other keywords are the compressor's; unknown
        ones are ignored, as the engine contract says."""
        super().__init__(context_length, recall=recall,
                         **{k: v for k, v in kwargs.items() if k in _COMPRESSOR_PARAMS})
        self.configured_anchor_index_tokens = anchor_index_tokens

    @property
    def offers_recall_tools(self) -> bool:
        """Always: the tools define this engine (without a recall they answer that they are unavailable)."""
        return True

    def recall_note(self) -> str:
        """lcm's own note: it names the anchor index too (kept only with the index, see ``decorate_summary``)."""
        return RECALL_NOTE

    @property
    def anchor_index_tokens(self) -> int:
        if self.configured_anchor_index_tokens is not None:
            return max(0, int(self.configured_anchor_index_tokens))
        return max(INDEX_MIN_TOKENS, min(INDEX_MAX_TOKENS, int(self.context_length * INDEX_WINDOW_SHARE)))

    # The summariser reads the previous summary's prose only ------------------------------------

    def _find_previous_summary(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        body = super()._find_previous_summary(messages)
        if body is None:
            return None
        return split_lcm_body(body)[0] or None

    def _previous_anchors(self, messages: Sequence[Mapping[str, Any]]) -> list[Anchor]:
        for msg in reversed(messages):
            if is_summary_message(msg):
                return parse_index(summary_body_of(msg))
        return []

    def _refs(self, messages: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """The reference of each message, from the host (None for all when it cannot say)."""
        refs: list[str | None] = [None] * len(messages)
        if self.recall is None:
            return refs
        try:
            live = list(self.recall.context_refs())
        except Exception:
            log.exception("recall could not list the context's references")
            return refs
        offset = 1 if messages and messages[0].get("role") == "system" else 0
        body = messages[offset:]
        if len(live) != len(body) or any(role != m.get("role") for (role, _), m in zip(live, body)):
            log.warning("the context's references do not match the messages being compacted; anchors carry none")
            return refs
        for i, (_, ref) in enumerate(live):
            refs[offset + i] = ref
        return refs

    # The anchor index after the summary's prose ---------------------------------------------------

    def decorate_summary(self, text: str, plan: CompactionPlan, fits: SummaryFits) -> str:
        """``text`` followed by the anchor index: the previous summary's anchors carried forward and
        those of the compacted span, as many as its budget holds, halved until the result is no
        bigger than its input. With none fitting, the summary goes without the index, and without
        the note that names it."""
        start, end = plan.bounds.start, plan.bounds.end
        fresh = extract_anchors(plan.messages[start:end], self._refs(plan.messages)[start:end])
        anchors = merge_anchors(self._previous_anchors(plan.messages), fresh)
        budget = self.anchor_index_tokens
        while True:
            index = render_index(fit_anchors(anchors, budget))
            decorated = _with_index(text, index)
            if fits(decorated) or (not index and budget == 0):
                return decorated
            budget = 0 if budget <= INDEX_MIN_TOKENS // 2 else budget // 2  # shrink until the result is smaller
