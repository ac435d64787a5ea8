"""Where the context goes: the request the model sees, split by kind (as Claude Code's ``/context``).

Guarantees of ``context_breakdown``:
- Each message counts what the engine counts for it (``message_tokens`` + ``MESSAGE_OVERHEAD_TOKENS``),
  each tool schema ``count_tokens(tools_text([tool]))``; image and document parts count what
  ``media_tokens`` counts for them (the documented formulas) under ``images`` ("Images and
  documents"), taken out of their message's own kind, so nothing is counted twice.
- Parts come in ``KINDS`` order, tool sources in the mapping's order; a part with no tokens is left
  out, except ``free``. A message carrying ``SUMMARY_KEY`` is a summary whatever its role.
- Real usage has no split: given a ``total``, the counted kinds are scaled to add up to it exactly
  (largest remainder) and the breakdown is ``estimated``. The parts always add up to
  ``max(window, total + output_reserve)``; ``pct`` and ``x`` are shares of that whole (the window
  unless the context overflows it), so a stacked bar never runs past 100 %.
- ``largest`` lists single messages (never the system prompt), biggest first, with tokens scaled by
  the same factor; a message with attachments names their files in its label. Non-dict entries, ``None`` content and negative or missing numbers never raise.
- Pure; no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .markers import SUMMARY_KEY, summary_body_of
from .media import attachment_name, media_parts
from .tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    call_function,
    content_text,
    count_tokens,
    media_tokens,
    message_tokens,
    tool_calls_of,
    tools_text,
)

KINDS = ("system", "tools", "summary", "messages", "tool_results", "images", "other", "output_reserve", "free")
LABELS = {
    "system": "System prompt",
    "summary": "Summary and anchor index",
    "messages": "User and assistant messages",
    "tool_results": "Tool results",
    "images": "Images and documents",
    "other": "Not broken down",  # only when a reported total has no counted content to split over
    "output_reserve": "Reserved for the reply",
    "free": "Free space",
}
PREVIEW_CHARS = 80
LABEL_FILES = 3  # attachments named in a largest item's label; the rest are "N more"


@dataclass(frozen=True)
class Part:
    kind: str  # one of KINDS, tool sources as "tools:<source>"
    label: str
    tokens: int
    pct: float = 0.0  # share of the whole, in percent, one decimal
    x: float = 0.0  # where the segment starts, in percent of the whole

    @property
    def slug(self) -> str:
        return kind_slug(self.kind)


@dataclass(frozen=True)
class Item:
    index: int  # position in the messages given
    ref: Any  # refs[index] when refs were given, else None
    kind: str
    label: str
    tokens: int
    preview: str


@dataclass(frozen=True)
class Breakdown:
    window: int
    total: int  # the counted kinds together: the reported total, or the counted sum
    counted: int  # the local count, before scaling
    output_reserve: int
    estimated: bool  # the split was scaled to a reported total
    scale: float
    parts: tuple[Part, ...]
    largest: tuple[Item, ...]

    def tokens(self, kind: str) -> int:
        return sum(p.tokens for p in self.parts if p.kind == kind)


def kind_slug(kind: str) -> str:
    """A CSS-safe name for a kind: ``tools:mcp:time`` -> ``tools-mcp-time``."""
    return re.sub(r"[^a-z0-9]+", "-", str(kind).lower()).strip("-") or "other"


def tools_label(source: str) -> str:
    name = str(source)
    if name.lower().startswith("mcp:"):
        name = "MCP " + name[4:]
    return f"Tools · {name}"


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0
    return max(0, int(value))


def _kind_of(msg: Mapping[str, Any]) -> str:
    if msg.get(SUMMARY_KEY):
        return "summary"
    role = msg.get("role")
    if role in ("system", "developer"):
        return "system"
    return "tool_results" if role == "tool" else "messages"


def _label_of(msg: Mapping[str, Any], kind: str, call_names: Mapping[str, str]) -> str:
    if kind == "summary":
        return "Summary"
    if kind == "tool_results":
        name = msg.get("name") or call_names.get(str(msg.get("tool_call_id")))
        label = f"Tool result · {name}" if name else "Tool result"
    else:
        role = msg.get("role")
        label = f"{role.capitalize()} message" if isinstance(role, str) and role else "Message"
    files = list(dict.fromkeys(n for n in map(attachment_name, media_parts(msg.get("content"))) if n))
    if len(files) > LABEL_FILES:
        files = [*files[:LABEL_FILES], f"{len(files) - LABEL_FILES} more"]
    return f"{label} · {', '.join(files)}" if files else label


def _preview(msg: Mapping[str, Any], kind: str) -> str:
    text = summary_body_of(msg) if kind == "summary" else content_text(msg.get("content"))
    if not text.strip():
        text = " ".join(f"{call_function(c).get('name') or 'tool'}({call_function(c).get('arguments') or ''})"
                        for c in tool_calls_of(msg))
    text = " ".join(str(text).split())
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1].rstrip() + "…"


def _largest_remainder(raw: Sequence[int], total: int) -> list[int]:
    """``raw`` scaled to integers that add up to ``total`` exactly (raw must sum to more than 0)."""
    whole = sum(raw)
    shares = [r * total // whole for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] * total % whole), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _tool_parts(tools_by_source: Any) -> list[tuple[str, str, int]]:
    parts = []
    for source, tools in (tools_by_source.items() if isinstance(tools_by_source, Mapping) else ()):
        schemas = [t for t in (tools if isinstance(tools, Iterable) and not isinstance(tools, (str, bytes)) else ())
                   if isinstance(t, Mapping)]
        if schemas:
            parts.append((f"tools:{source}", tools_label(source), sum(count_tokens(tools_text([t])) for t in schemas)))
    return parts


def _message_sums(msgs: list[Any]) -> tuple[dict[str, int], list[tuple[int, int, str]], dict[str, str]]:
    """(counted tokens by kind, (counted size, index, kind) of every message but the system prompt,
    {tool call id: tool name})."""
    sums = dict.fromkeys(("system", "summary", "messages", "tool_results", "images"), 0)
    sizes: list[tuple[int, int, str]] = []
    call_names: dict[str, str] = {}
    for index, msg in enumerate(msgs):
        if not isinstance(msg, Mapping):
            continue
        for call in tool_calls_of(msg):
            name = call_function(call).get("name")
            if call.get("id") and name:
                call_names[str(call["id"])] = str(name)
        own = message_tokens(msg)
        images = min(own, media_tokens(msg.get("content")))
        kind = _kind_of(msg)
        sums[kind] += own - images + MESSAGE_OVERHEAD_TOKENS
        sums["images"] += images
        if kind != "system":
            sizes.append((own + MESSAGE_OVERHEAD_TOKENS, index, kind))
    return sums, sizes, call_names


def _bar(counted_parts: list[tuple[str, str, int]], used: int, window: int, reserve: int) -> tuple[Part, ...]:
    """The parts, the output reserve and the free room, each placed along the window."""
    rows = [*counted_parts, ("output_reserve", LABELS["output_reserve"], reserve)]
    rows = [r for r in rows if r[2] > 0]
    rows.append(("free", LABELS["free"], max(0, window - used - reserve)))
    whole = max(window, used + reserve)
    parts, offset = [], 0
    for kind, label, n in rows:
        parts.append(Part(kind, label, n, pct=round(100.0 * n / whole, 1) if whole else 0.0,
                          x=round(100.0 * offset / whole, 1) if whole else 0.0))
        offset += n
    return tuple(parts)


def context_breakdown(
    messages: Iterable[Any],
    *,
    tools_by_source: Mapping[str, Iterable[Mapping[str, Any]]] | None,
    window: int,
    output_reserve: int = 0,
    total: int | None = None,
    refs: Sequence[Any] | None = None,
    largest_n: int = 5,
) -> Breakdown:
    """The request split by kind, scaled to ``total`` when one is reported; see the module docstring."""
    msgs = list(messages or ())
    sums, sizes, call_names = _message_sums(msgs)
    counted_parts = [("system", LABELS["system"], sums["system"]), *_tool_parts(tools_by_source),
                     *((k, LABELS[k], sums[k]) for k in ("summary", "messages", "tool_results", "images"))]
    counted = sum(n for _, _, n in counted_parts)
    reported = _count(total)
    estimated = reported > 0 and counted > 0
    scale = reported / counted if estimated else 1.0
    if estimated:
        shares = _largest_remainder([n for _, _, n in counted_parts], reported)
        counted_parts = [(k, label, s) for (k, label, _), s in zip(counted_parts, shares)]
    elif reported > 0:
        counted_parts.append(("other", LABELS["other"], reported))
    used = reported or counted
    window, reserve = _count(window), _count(output_reserve)

    sizes.sort(key=lambda s: (-s[0], s[1]))
    ref_list = list(refs) if refs is not None else None
    largest = tuple(
        Item(index, ref_list[index] if ref_list is not None and index < len(ref_list) else None, kind,
             _label_of(msgs[index], kind, call_names), round(size * scale), _preview(msgs[index], kind))
        for size, index, kind in sizes[: _count(largest_n)]
    )
    return Breakdown(window=window, total=used, counted=counted, output_reserve=reserve, estimated=estimated,
                     scale=scale, parts=_bar(counted_parts, used, window, reserve), largest=largest)
