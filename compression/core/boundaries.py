"""Phase 2 of compression (SPEC §6): where the protected head ends and the protected tail begins.

Guarantees, for ``find_boundaries(...) -> Boundaries(start, end)`` (summarise ``messages[start:end]``):
- Head: the system message plus ``protect_first_n`` messages on the first compression only, the
  system message alone afterwards; ``start`` moves forward past tool messages, so the middle never
  starts inside a tool group.
- Tail: a token walk back from the end within ``tail_token_budget``. The one message that crosses
  the budget may still be kept when the tail then stays within ``1.5 × tail_token_budget`` (one
  oversized message overshoots; the walk stops there, so the allowance never stretches the whole
  walk). Re-walked without the allowance when the whole transcript fits; at least
  ``max(3, min(protect_last_n, 8))`` messages are kept and at least 2 left to summarise when the
  transcript allows it.
- ``end`` never starts the tail on a tool result: a split tool group moves wholly into the tail.
- The last real user message and the last assistant message with text are never summarised: the
  cut moves back to keep them in the tail; if one sits at the very start of the middle, it is kept
  verbatim just before the summary instead (otherwise compression would be impossible).
- ``start >= end`` means nothing to compress. Pure functions over read-only messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .markers import is_summary_only, own_text

MAX_TAIL_MESSAGE_FLOOR = 8
MIN_TAIL_MESSAGES = 3
TAIL_SOFT_CEILING = 1.5

TokenCounter = Callable[[Mapping[str, Any]], int]


@dataclass(frozen=True)
class Boundaries:
    start: int
    end: int

    @property
    def has_content(self) -> bool:
        return self.start < self.end


def head_size(messages: Sequence[Mapping[str, Any]], protect_first_n: int, first_compression: bool) -> int:
    """System message (if first) + ``protect_first_n`` on the first compression only (head decay)."""
    system = 1 if messages and messages[0].get("role") == "system" else 0
    extra = max(0, protect_first_n) if first_compression else 0
    return min(len(messages), system + extra)


def align_boundary_forward(messages: Sequence[Mapping[str, Any]], idx: int) -> int:
    while idx < len(messages) and messages[idx].get("role") == "tool":
        idx += 1
    return idx


def align_boundary_backward(messages: Sequence[Mapping[str, Any]], idx: int) -> int:
    """Move a cut that would start the tail inside a tool group back to the group's assistant message."""
    if idx <= 0 or idx >= len(messages) or messages[idx].get("role") != "tool":
        return idx
    j = idx
    while j > 0 and messages[j].get("role") == "tool":
        j -= 1
    if messages[j].get("role") == "assistant" and messages[j].get("tool_calls"):
        return j
    return j + 1  # orphan results: keep them together on the tail side


def last_user_index(messages: Sequence[Mapping[str, Any]], start: int = 0) -> int | None:
    for i in range(len(messages) - 1, start - 1, -1):
        msg = messages[i]
        if msg.get("role") == "user" and not is_summary_only(msg):
            return i
    return None


def last_assistant_text_index(messages: Sequence[Mapping[str, Any]], start: int = 0) -> int | None:
    for i in range(len(messages) - 1, start - 1, -1):
        msg = messages[i]
        if msg.get("role") == "assistant" and not is_summary_only(msg) and own_text(msg).strip():
            return i
    return None


def find_tail_cut(
    messages: Sequence[Mapping[str, Any]],
    head_end: int,
    budget: int,
    protect_last_n: int,
    token_counter: TokenCounter,
) -> int:
    """Index where the tail starts, from the token walk and the message floors (before anchors)."""
    n = len(messages)
    available_tail = max(0, n - head_end - 1)
    min_tail_floor = max(MIN_TAIL_MESSAGES, min(protect_last_n, MAX_TAIL_MESSAGE_FLOOR))
    compressible_tail_cap = max(MIN_TAIL_MESSAGES, available_tail - 2)  # leave ≥ 2 to summarise
    min_tail = min(min_tail_floor, compressible_tail_cap, available_tail) if available_tail > 1 else 0

    soft_ceiling = int(budget * TAIL_SOFT_CEILING)

    def walk(allow_overshoot: bool) -> tuple[int, int]:
        acc, cut = 0, n
        for i in range(n - 1, head_end - 1, -1):
            tokens = token_counter(messages[i])
            if acc + tokens > budget and (n - i) > min_tail:
                if allow_overshoot and acc + tokens <= soft_ceiling:
                    acc += tokens  # the one message crossing the budget; the walk ends with it
                    cut = i
                break
            acc += tokens
            cut = i
        return cut, acc

    cut, acc = walk(allow_overshoot=True)
    if cut <= head_end and 0 < acc <= soft_ceiling:
        # Everything fits with the allowance: the raw budget still leaves something to compress.
        cut, acc = walk(allow_overshoot=False)
    cut = min(cut, n - min_tail)
    if cut <= head_end:
        cut = max(n - min_tail, head_end + 1)
    return align_boundary_backward(messages, cut)


def apply_anchors(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> tuple[int, int]:
    """Keep the last user message and the last assistant message with text out of the middle."""
    anchors = sorted(
        a for a in (last_user_index(messages, start), last_assistant_text_index(messages, start)) if a is not None
    )
    for anchor in anchors:
        if anchor < start or anchor >= end:
            continue
        cut = anchor if messages[anchor].get("role") == "user" else align_boundary_backward(messages, anchor)
        if cut > start:
            end = cut
        else:
            # It opens the middle: nothing before it to summarise. Keep it (and its tool group)
            # verbatim ahead of the summary instead of making the whole compression impossible.
            start = align_boundary_forward(messages, anchor + 1)
    return start, end


def find_boundaries(
    messages: Sequence[Mapping[str, Any]],
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_token_budget: int,
    first_compression: bool,
    token_counter: TokenCounter,
) -> Boundaries:
    start = align_boundary_forward(messages, head_size(messages, protect_first_n, first_compression))
    if start >= len(messages):
        return Boundaries(start, start)
    end = find_tail_cut(messages, start, tail_token_budget, protect_last_n, token_counter)
    start, end = apply_anchors(messages, start, end)
    return Boundaries(start, max(start, end))
