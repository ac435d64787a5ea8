"""Shared shapes for the workspace tools: the result type, the refusal exception, the output cap."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_OUTPUT_CHARS = 20_000
DEFAULT_TERMINAL_TIMEOUT = 30


@dataclass(frozen=True)
class ToolResult:
    """What a tool call puts into the context: text for the model, and whether the call failed."""

    content: str
    is_error: bool = False


class ToolError(Exception):
    """A refusal or failure the model should see as `Error: <message>` (never raised out of run_tool)."""


def cap_output(text: str, max_chars: int, *, hint: str) -> str:
    """`text` if it fits in `max_chars`, else its head plus a note saying how big it was.

    The note is counted inside the cap, so the result is never longer than `max_chars`.
    """
    if len(text) <= max_chars:
        return text
    note = f"\n[output truncated: {len(text):,} chars total; {hint}]"
    return text[: max(0, max_chars - len(note))] + note
