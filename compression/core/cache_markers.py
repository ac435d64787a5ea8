"""Cache breakpoints themselves (SPEC §8): the marker, which message can carry one and how it is
placed, how many a request holds and in which TTL order, and the two placements every strategy
builds on (`none`, `system_and_3`). A leaf of the caching modules: `caching` (the registry, the
routes' status) and `cache_strategies` (the cache-aware strategies) both import it, and it imports
neither."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_BREAKPOINTS = 4
VALID_TTLS = ("5m", "1h")
DEFAULT_STRATEGY = "rolling_1h"  # the cheapest under the documented rules (bench/cache_economics.py)


def cache_marker(cache_ttl: str = "5m") -> dict[str, str]:
    if cache_ttl not in VALID_TTLS:
        raise ValueError(f"cache_ttl must be one of {', '.join(VALID_TTLS)} (got {cache_ttl!r})")
    return {"type": "ephemeral", "ttl": "1h"} if cache_ttl == "1h" else {"type": "ephemeral"}


def strip_markers(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    # One deepcopy per message: shared sub-objects across messages must not share a marker.
    out = [copy.deepcopy(dict(m)) for m in messages]
    for msg in out:
        msg.pop("cache_control", None)
        content = msg.get("content")
        if isinstance(content, list):
            for part in content:
                if isinstance(part, dict):
                    part.pop("cache_control", None)
    return out


def count_breakpoints(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> int:
    n = sum(1 for t in tools or () if isinstance(t, Mapping) and "cache_control" in t)
    for msg in messages:
        n += "cache_control" in msg
        content = msg.get("content")
        if isinstance(content, list):
            n += sum(1 for p in content if isinstance(p, Mapping) and "cache_control" in p)
    return n


def _is_empty(content: Any) -> bool:
    return content is None or content == ""


def can_carry_marker(msg: Mapping[str, Any], native_anthropic: bool) -> bool:
    content = msg.get("content")
    if isinstance(content, list):
        return bool(content) and isinstance(content[-1], dict)
    if isinstance(content, str) and content:
        return True
    if not _is_empty(content):
        return False
    if native_anthropic:
        return True  # a message-level marker; the converter moves it onto the right block
    # OpenRouter hangs on a top-level marker on role:tool; a bare tool-call turn ignores envelope markers.
    return msg.get("role") not in ("tool", "assistant")


def place_marker(msg: dict[str, Any], marker: Mapping[str, str], native_anthropic: bool) -> None:
    content = msg.get("content")
    if msg.get("role") == "tool" and native_anthropic:
        msg["cache_control"] = dict(marker)
    elif isinstance(content, str) and content:
        msg["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = dict(marker)
    elif _is_empty(content):
        msg["cache_control"] = dict(marker)


@dataclass(frozen=True)
class CachedRequest:
    """The request parts after a strategy placed its breakpoints."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    breakpoints: int = 0
    strategy: str = DEFAULT_STRATEGY
    notes: tuple[str, ...] = field(default=())


Messages = list[dict[str, Any]]
Tools = list[dict[str, Any]] | None


def none_strategy(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool,
                  tools: Tools) -> CachedRequest:
    return CachedRequest(messages, copy.deepcopy(tools) if tools is not None else None, 0, "none")


def system_and_3(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool,
                 tools: Tools) -> CachedRequest:
    used = 0
    if messages and messages[0].get("role") == "system" and can_carry_marker(messages[0], native_anthropic):
        place_marker(messages[0], marker, native_anthropic)
        used = 1
    carriers = [
        m for m in messages if m.get("role") != "system" and can_carry_marker(m, native_anthropic)
    ]
    for msg in carriers[max(0, len(carriers) - (MAX_BREAKPOINTS - used)):]:
        place_marker(msg, marker, native_anthropic)
        used += 1
    return CachedRequest(
        messages, copy.deepcopy(tools) if tools is not None else None, used, "system_and_3"
    )


def marker_ttls(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """The TTL of every breakpoint in prefix order (tools, system, messages), as the API reads them.

    Internal messages keep the system message first, so list order is prefix order; a message-level
    marker ends its message (the converter moves it onto the last block)."""

    def ttl(marker: Any) -> str:
        return "1h" if isinstance(marker, Mapping) and marker.get("ttl") == "1h" else "5m"

    out = [ttl(t["cache_control"]) for t in tools or () if isinstance(t, Mapping) and "cache_control" in t]
    ordered = [m for m in messages if m.get("role") == "system"] + [m for m in messages if m.get("role") != "system"]
    for msg in ordered:
        content = msg.get("content")
        if isinstance(content, list):
            out += [ttl(p["cache_control"]) for p in content if isinstance(p, Mapping) and "cache_control" in p]
        if "cache_control" in msg:
            out.append(ttl(msg["cache_control"]))
    return out


def ttl_order_ok(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> bool:
    """False when a 1h breakpoint comes after a 5m one in prefix order (the API's 400)."""
    seen_5m = False
    for ttl in marker_ttls(messages, tools):
        if ttl == "1h" and seen_5m:
            return False
        seen_5m = seen_5m or ttl == "5m"
    return True
