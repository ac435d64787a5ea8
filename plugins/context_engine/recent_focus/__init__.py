"""Example context-engine plugin: the built-in compressor with an automatic focus topic.

Select it with ``context.engine = "recent_focus"``. When no ``/compress <topic>`` is given, the
focus topic is derived from the user's most recent requests (up to 3 real user turns, each cut to
260 chars, 700 chars in all, oldest first), so the summary keeps full detail on what the user is
working on now. Everything else is the built-in ``ContextCompressor``.

A plugin folder needs only an ``__init__.py`` that defines a ``ContextEngine`` subclass (the first
one found is instantiated with the keyword arguments its constructor accepts) or a
``register(ctx)`` function calling ``ctx.register_context_engine(EngineClass)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from compression.core.compressor import ContextCompressor
from compression.core.markers import is_summary_message, own_text

FOCUS_TURNS = 3
FOCUS_TURN_CHARS = 260
FOCUS_MAX_CHARS = 700


def recent_user_focus(messages: Sequence[Mapping[str, Any]]) -> str | None:
    turns: list[str] = []
    for msg in reversed(messages):
        if msg.get("role") != "user" or (is_summary_message(msg) and not own_text(msg).strip()):
            continue
        text = " ".join(own_text(msg).split())
        if text:
            turns.append(text if len(text) <= FOCUS_TURN_CHARS else text[: FOCUS_TURN_CHARS - 1] + "…")
        if len(turns) == FOCUS_TURNS:
            break
    if not turns:
        return None
    return ("Recent user focus: " + " | ".join(reversed(turns)))[:FOCUS_MAX_CHARS]


class RecentFocusCompressor(ContextCompressor):
    name = "recent_focus"
    description = "Built-in compressor that focuses the summary on the user's latest requests."

    def compress(self, messages, current_tokens=None, focus_topic=None, force=False, **kwargs):
        return super().compress(
            messages, current_tokens, focus_topic or recent_user_focus(messages), force, **kwargs
        )
