"""Phase 4 of compression (SPEC §6): head + summary + tail, with valid roles and tool pairs.

Guarantees of ``assemble``:
- exactly one message carries a summary: summaries left over in the kept head or tail from an
  earlier compaction are removed (merged ones get their own content back), because the new summary
  already incorporates them (iterative update);
- the system prompt gets the compaction note appended once (never the summary's prefix);
- the summary's role avoids two consecutive messages of the same role: user after
  system/assistant/tool, else assistant; flipped when it collides with the first tail message; a
  double collision (or a user summary after the system message facing a user tail) merges the
  summary into the first tail message, summary first, then the end marker, then the message's own
  content;
- tool pairs are sanitised; returned messages are fresh deep copies (the input is never shared).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from .markers import (
    FALLBACK_KEY,
    MERGED_KEY,
    SUMMARY_KEY,
    SYSTEM_NOTE,
    is_summary_message,
    is_summary_only,
    message_text,
    split_merged,
    wrap_summary,
)
from .tokens import TOKENS_KEY
from .tool_pairs import sanitize_tool_pairs


def _without(msg: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k not in keys}


def _unmerge(msg: Mapping[str, Any]) -> dict[str, Any] | None:
    """A kept message without an old summary: merged → its own content; standalone → None (dropped)."""
    if not is_summary_message(msg):
        return copy.deepcopy(dict(msg))
    if is_summary_only(msg):
        return None
    own = split_merged(msg)[1]
    out = copy.deepcopy(_without(msg, SUMMARY_KEY, MERGED_KEY, FALLBACK_KEY, TOKENS_KEY))
    out["content"] = own
    return out


def with_system_note(msg: Mapping[str, Any]) -> dict[str, Any]:
    """The system message with the compaction note appended, unless it already has it."""
    if SYSTEM_NOTE in message_text(msg):
        return dict(msg)
    out = _without(msg, TOKENS_KEY)
    content = msg.get("content")
    if isinstance(content, list):
        out["content"] = [*content, {"type": "text", "text": SYSTEM_NOTE}]
    elif content:
        out["content"] = f"{content}\n\n{SYSTEM_NOTE}"
    else:
        out["content"] = SYSTEM_NOTE
    return out


def choose_summary_role(head: Sequence[Mapping[str, Any]], tail: Sequence[Mapping[str, Any]]) -> tuple[str, bool]:
    """``(role, merge_into_first_tail_message)`` for the summary (SPEC §6 phase 4)."""
    last_head_role = head[-1].get("role") if head else None
    first_tail_role = tail[0].get("role") if tail else None
    # Anthropic: the first visible message after the system prompt must be a user message.
    force_user = last_head_role in (None, "system")
    role = "user" if force_user or last_head_role in ("assistant", "tool") else "assistant"
    if role != first_tail_role:
        return role, False
    flipped = "assistant" if role == "user" else "user"
    if not force_user and flipped != last_head_role:
        return flipped, False
    return role, True


def merge_summary(msg: Mapping[str, Any], summary_text: str, *, fallback: bool = False) -> dict[str, Any]:
    """``msg`` carrying the summary ahead of its own content (the end marker points at that content)."""
    out = _without(msg, TOKENS_KEY)
    content = msg.get("content")
    if isinstance(content, list):
        out["content"] = [{"type": "text", "text": summary_text}, *content]
    elif content:
        out["content"] = f"{summary_text}\n\n{content}"
    else:
        out["content"] = summary_text
    out[SUMMARY_KEY] = True
    out[MERGED_KEY] = True
    if fallback:
        out[FALLBACK_KEY] = True
    return out


def assemble(
    messages: Sequence[Mapping[str, Any]],
    start: int,
    end: int,
    summary_body: str,
    *,
    fallback: bool = False,
) -> list[dict[str, Any]]:
    head = [m for m in (_unmerge(m) for m in messages[:start]) if m is not None]
    tail = [m for m in (_unmerge(m) for m in messages[end:]) if m is not None]
    if head and head[0].get("role") == "system":
        head[0] = with_system_note(head[0])
    summary_text = wrap_summary(summary_body)
    role, merge = choose_summary_role(head, tail)
    if merge:
        tail[0] = merge_summary(tail[0], summary_text, fallback=fallback)
        middle: list[dict[str, Any]] = []
    else:
        summary_msg: dict[str, Any] = {"role": role, "content": summary_text, SUMMARY_KEY: True}
        if fallback:
            summary_msg[FALLBACK_KEY] = True
        middle = [summary_msg]
    return sanitize_tool_pairs(head + middle + tail)
