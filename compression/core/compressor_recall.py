"""How the built-in compressor offers the recall tools (``recall_tools.py``): ``context_search`` and
``context_expand`` when the host gave it a ``recall`` and ``context.recall_tools`` is on, and a
sentence in the summary's prefix that says they exist (``RECALL_TOOLS_NOTE``; the compressor
leaves it out when the note alone would make the result bigger than its input).

`RecallOffering` is a mixin of `ContextCompressor`; it expects the engine's `recall` and
`recall_tools`, and comes before `ContextEngine` in the class's bases so that any other tool name
reaches the engine's own answer.
"""

from __future__ import annotations

from typing import Any

from .markers import RECALL_TOOLS_NOTE
from .recall_tools import TOOL_NAMES, Recall, answer_tool_call, tool_schemas


class RecallOffering:
    recall: Recall | None
    recall_tools: bool

    @property
    def offers_recall_tools(self) -> bool:
        """True when ``context_search`` / ``context_expand`` are offered: a recall and the setting on."""
        return self.recall_tools and self.recall is not None

    def recall_note(self) -> str:
        """The sentence the summary's prefix carries about the recall tools ("" when none are offered)."""
        return RECALL_TOOLS_NOTE if self.offers_recall_tools else ""

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return tool_schemas() if self.offers_recall_tools else []

    def handle_tool_call(self, name: str, args: dict[str, Any], **ctx: Any) -> str:
        if name in TOOL_NAMES and self.offers_recall_tools:
            return answer_tool_call(self.recall, name, args)
        answer: str = super().handle_tool_call(name, args, **ctx)  # type: ignore[misc]
        return answer
