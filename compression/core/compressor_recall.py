"""How the built-in compressor offers the recall tools (``recall_tools.py``): ``context_search`` and
``context_expand`` when the host gave it a ``recall`` and ``context.recall_tools`` is on, and a
sentence in the summary's prefix that says they exist (``RECALL_TOOLS_NOTE``), left out when the
note alone would make the result bigger than its input.

`RecallOffering` is a mixin of `ContextCompressor`; it expects the engine's `recall`,
`recall_tools`, `_counted` and `count_messages_tokens`, and comes before `ContextEngine` in the
class's bases so that any other tool name reaches the engine's own answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from .markers import RECALL_TOOLS_NOTE, SUMMARY_KEY, replace_summary_text, wrap_summary
from .recall_tools import TOOL_NAMES, Recall, answer_tool_call, tool_schemas

log = logging.getLogger("compression.core.compressor")


class RecallOffering:
    recall: Recall | None
    recall_tools: bool
    _counted: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
    count_messages_tokens: Callable[[Sequence[Any]], int]

    @property
    def offers_recall_tools(self) -> bool:
        """True when ``context_search`` / ``context_expand`` are offered: a recall and the setting on."""
        return self.recall_tools and self.recall is not None

    def recall_note(self) -> str:
        """The sentence the summary's prefix carries about the recall tools ("" when none are offered)."""
        return RECALL_TOOLS_NOTE if self.offers_recall_tools else ""

    def _with_recall_note(
        self, out: list[dict[str, Any]], summary_text: str, body: str, tokens_before: int
    ) -> tuple[list[dict[str, Any]], str, int] | None:
        """(messages, summary text, tokens) with the recall note in the summary's prefix; None when
        no note is due, the summary cannot be found, or the note would make the result bigger than
        the input."""
        note = self.recall_note()
        at = next((i for i, m in enumerate(out) if m.get(SUMMARY_KEY)), None) if note else None
        if at is None:
            return None
        noted_text = wrap_summary(body, note)
        replaced = replace_summary_text(out[at], summary_text, noted_text)
        if replaced is None:
            log.warning("the summary message has an unexpected shape; it is left without the recall note")
            return None
        noted = self._counted([*out[:at], replaced, *out[at + 1:]])
        tokens = self.count_messages_tokens(noted)
        return (noted, noted_text, tokens) if tokens <= tokens_before else None

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas() if self.offers_recall_tools else []

    def handle_tool_call(self, name: str, args: dict[str, Any], **ctx: Any) -> str:
        if name in TOOL_NAMES and self.offers_recall_tools:
            return answer_tool_call(self.recall, name, args)
        return super().handle_tool_call(name, args, **ctx)  # type: ignore[misc]
