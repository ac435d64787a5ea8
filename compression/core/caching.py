"""Anthropic prompt caching (SPEC §8): where ``cache_control`` breakpoints go, and whether to use them.

Guarantees:
- Every placement function returns a deep copy and never mutates its input; markers already present
  in the input are removed first, so the result never carries more than 4 breakpoints.
- ``system_and_3``: breakpoint 1 on the system prompt, the rest on the last non-system messages that
  can carry one. Placement: string content → one text block carrying the marker; list content → its
  last block; empty content → ``msg["cache_control"]``; tool messages → ``msg["cache_control"]`` on
  native Anthropic (the converter moves it onto the ``tool_result`` block); on OpenRouter-style
  routes tool messages carry it in their content and empty ones (and content-less assistant
  tool-call turns) are skipped without using up a breakpoint.
- TTL is ``5m`` or ``1h``; anything else raises ``ValueError`` (never silently changed).
  ``system_and_3`` uses one TTL per request; strategies that mix TTLs put 1h markers before 5m
  ones in prefix order (tools, system, messages), and ``apply_cache_strategy`` refuses a result
  that breaks this or carries more than 4 markers.
- Strategies are looked up by name in a small registry (``none`` and ``system_and_3`` built in, plus
  the cache-aware ones of ``compression.core.cache_strategies``: ``rolling_1h``, ``warm_anchor``,
  ``stable_prefix``, ``tools_and_3``), so later strategies are one ``register_cache_strategy`` call.
  Their costs under the documented caching rules are measured by ``bench/cache_economics.py``.
- A strategy may take optional ``hints`` (e.g. ``after_compression``); callers that have none pass
  nothing and every strategy still works.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import urlparse

MAX_BREAKPOINTS = 4
VALID_TTLS = ("5m", "1h")
DEFAULT_STRATEGY = "rolling_1h"  # the cheapest under the documented rules (bench/cache_economics.py)


def cache_marker(cache_ttl: str = "5m") -> dict[str, str]:
    if cache_ttl not in VALID_TTLS:
        raise ValueError(f"cache_ttl must be one of {', '.join(VALID_TTLS)} (got {cache_ttl!r})")
    return {"type": "ephemeral", "ttl": "1h"} if cache_ttl == "1h" else {"type": "ephemeral"}


def _strip_markers(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
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


def _place_marker(msg: dict[str, Any], marker: Mapping[str, str], native_anthropic: bool) -> None:
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


CacheStrategy = Callable[..., CachedRequest]
_STRATEGIES: dict[str, CacheStrategy] = {}
_TAKES_HINTS: set[str] = set()


def _accepts_hints(strategy: CacheStrategy) -> bool:
    try:
        params = inspect.signature(strategy).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "hints" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def register_cache_strategy(name: str, strategy: CacheStrategy) -> None:
    """Register ``strategy(messages, *, marker, native_anthropic, tools[, hints]) -> CachedRequest``.

    ``messages`` is already a marker-free deep copy the strategy may modify. A strategy that
    declares ``hints`` (or ``**kwargs``) receives the caller's hints mapping (possibly empty).
    """
    _STRATEGIES[name] = strategy
    if _accepts_hints(strategy):
        _TAKES_HINTS.add(name)
    else:
        _TAKES_HINTS.discard(name)


def available_cache_strategies() -> list[str]:
    return sorted(_STRATEGIES)


def _none(messages, *, marker, native_anthropic, tools):
    return CachedRequest(messages, copy.deepcopy(tools) if tools is not None else None, 0, "none")


def _system_and_3(messages, *, marker, native_anthropic, tools):
    used = 0
    if messages and messages[0].get("role") == "system" and can_carry_marker(messages[0], native_anthropic):
        _place_marker(messages[0], marker, native_anthropic)
        used = 1
    carriers = [
        m for m in messages if m.get("role") != "system" and can_carry_marker(m, native_anthropic)
    ]
    for msg in carriers[max(0, len(carriers) - (MAX_BREAKPOINTS - used)):]:
        _place_marker(msg, marker, native_anthropic)
        used += 1
    return CachedRequest(
        messages, copy.deepcopy(tools) if tools is not None else None, used, "system_and_3"
    )


register_cache_strategy("none", _none)
register_cache_strategy("system_and_3", _system_and_3)


def apply_cache_strategy(
    messages: Sequence[Mapping[str, Any]],
    strategy: str = DEFAULT_STRATEGY,
    cache_ttl: str = "5m",
    native_anthropic: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    hints: Mapping[str, Any] | None = None,
) -> CachedRequest:
    """Apply the named strategy. ``hints`` (optional) reach only strategies that declare them."""
    if strategy not in _STRATEGIES:
        raise ValueError(f"unknown cache strategy {strategy!r}; available: {', '.join(available_cache_strategies())}")
    marker = cache_marker(cache_ttl)
    cleaned_tools = None
    if tools is not None:
        cleaned_tools = [{k: v for k, v in t.items() if k != "cache_control"} for t in tools]
    extra = {"hints": dict(hints or {})} if strategy in _TAKES_HINTS else {}
    result = _STRATEGIES[strategy](
        _strip_markers(messages), marker=marker, native_anthropic=native_anthropic, tools=cleaned_tools, **extra
    )
    if count_breakpoints(result.messages, result.tools) > MAX_BREAKPOINTS:
        raise RuntimeError(f"cache strategy {strategy!r} placed more than {MAX_BREAKPOINTS} breakpoints")
    if not ttl_order_ok(result.messages, result.tools):
        raise RuntimeError(f"cache strategy {strategy!r} put a 1h breakpoint after a 5m one")
    return result


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


def apply_anthropic_cache_control(
    messages: Sequence[Mapping[str, Any]], cache_ttl: str = "5m", native_anthropic: bool = True
) -> list[dict[str, Any]]:
    """A deep copy of ``messages`` with the ``system_and_3`` breakpoints."""
    return apply_cache_strategy(messages, "system_and_3", cache_ttl, native_anthropic).messages


class CachingStatus(NamedTuple):
    enabled: bool
    route: str  # e.g. "native Anthropic", "OpenRouter"; "" when disabled
    reason: str

    @property
    def native_layout(self) -> bool:
        return self.enabled and self.route != ROUTE_OPENROUTER

    def label(self, cache_ttl: str = "5m") -> str:
        if self.enabled:
            return f"Prompt caching: ENABLED (Claude via {self.route}, {cache_ttl} TTL)"
        return f"Prompt caching: DISABLED ({self.reason})"


ROUTE_NATIVE = "native Anthropic"
ROUTE_COMPATIBLE = "Anthropic-compatible endpoint"
ROUTE_SIMULATOR = "the simulator (Anthropic-compatible)"
ROUTE_OPENROUTER = "OpenRouter"


def _host(base_url: str | None) -> str:
    if not base_url:
        return ""
    try:
        return (urlparse(base_url if "://" in base_url else "https://" + base_url).hostname or "").lower()
    except ValueError:
        return ""


def prompt_caching_status(
    model: str | None, provider: str | None, base_url: str | None = None, api_mode: str | None = None
) -> CachingStatus:
    """Whether ``cache_control`` breakpoints are used for this model and route, and why (SPEC §8)."""
    provider = (provider or "").strip().lower()
    host = _host(base_url)
    if "claude" not in (model or "").lower():
        return CachingStatus(False, "", f"model {model or '(none)'} is not a Claude model")
    if provider == "anthropic" or host == "api.anthropic.com":
        return CachingStatus(True, ROUTE_NATIVE, "")
    if provider == "simulator":
        return CachingStatus(True, ROUTE_SIMULATOR, "")
    if provider == "openrouter" or host == "openrouter.ai" or host.endswith(".openrouter.ai"):
        return CachingStatus(True, ROUTE_OPENROUTER, "")
    if api_mode == "anthropic_messages":
        return CachingStatus(True, ROUTE_COMPATIBLE, "")
    return CachingStatus(False, "", f"route {provider or host or '(unknown)'} does not support cache_control")


# The cache-aware strategies (SPEC §13.2) live in their own module; registering them here makes
# them available wherever the registry is (the admin's choices, the agent loop, the benchmark).
from compression.core.cache_strategies import EXTRA_STRATEGIES as _EXTRA_STRATEGIES  # noqa: E402

for _name, _strategy in _EXTRA_STRATEGIES.items():
    register_cache_strategy(_name, _strategy)
