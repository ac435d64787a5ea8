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

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple
from urllib.parse import urlparse

from compression.core.cache_markers import (  # re-exported (``__all__``): the caching API in one place
    DEFAULT_STRATEGY,
    MAX_BREAKPOINTS,
    VALID_TTLS,
    CachedRequest,
    cache_marker,
    can_carry_marker,
    count_breakpoints,
    marker_ttls,
    none_strategy,
    place_marker,
    strip_markers,
    system_and_3,
    ttl_order_ok,
)
from compression.core.cache_strategies import EXTRA_STRATEGIES as _EXTRA_STRATEGIES

__all__ = [
    "DEFAULT_STRATEGY", "MAX_BREAKPOINTS", "ROUTE_COMPATIBLE", "ROUTE_NATIVE", "ROUTE_OPENROUTER", "ROUTE_SIMULATOR",
    "VALID_TTLS", "CacheStrategy", "CachedRequest", "CachingStatus", "apply_cache_strategy",
    "available_cache_strategies", "cache_marker", "can_carry_marker", "count_breakpoints", "marker_ttls",
    "none_strategy", "place_marker", "prompt_caching_status", "register_cache_strategy", "strategy_ttls",
    "strip_markers", "system_and_3", "ttl_order_ok",
]

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


register_cache_strategy("none", none_strategy)
register_cache_strategy("system_and_3", system_and_3)


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
        strip_markers(messages), marker=marker, native_anthropic=native_anthropic, tools=cleaned_tools, **extra
    )
    if count_breakpoints(result.messages, result.tools) > MAX_BREAKPOINTS:
        raise RuntimeError(f"cache strategy {strategy!r} placed more than {MAX_BREAKPOINTS} breakpoints")
    if not ttl_order_ok(result.messages, result.tools):
        raise RuntimeError(f"cache strategy {strategy!r} put a 1h breakpoint after a 5m one")
    return result


class CachingStatus(NamedTuple):
    enabled: bool
    route: str  # e.g. "native Anthropic", "OpenRouter"; "" when disabled
    reason: str

    @property
    def native_layout(self) -> bool:
        return self.enabled and self.route != ROUTE_OPENROUTER

    def label(self, cache_ttl: str = "5m", strategy: str = "system_and_3") -> str:
        """The route, the strategy by name and the TTL each of its breakpoints gets."""
        if not self.enabled:
            return f"Prompt caching: DISABLED ({self.reason})"
        if strategy == "none":
            return f"Prompt caching: OFF (strategy none: no cache breakpoints; Claude via {self.route})"
        return f"Prompt caching: ENABLED (Claude via {self.route}; strategy {strategy}: {strategy_ttls(strategy, cache_ttl)})"


# Where each built-in strategy writes which TTL (compression.core.cache_strategies); `{ttl}` is the
# configured prompt_caching.cache_ttl.
_STRATEGY_TTLS = {
    "system_and_3": "{ttl} on the system prompt and the last 3 messages",
    "tools_and_3": "{ttl} on the tool schemas and the last 3 messages",
    "rolling_1h": "1h on the system prompt and the model's newest reply after tool results, {ttl} on the "
                  "messages after it (a turn's first request too, within 4 minutes of the last call; after a "
                  "longer pause as system_and_3, {ttl})",
    "warm_anchor": "1h on the system prompt, the summary and the previous request's end, {ttl} on the newest message",
    "stable_prefix": "1h on the system prompt and the summary, {ttl} on the newest messages",
}


def strategy_ttls(strategy: str, cache_ttl: str) -> str:
    """Which TTLs a strategy writes, in words (a plugin's strategy: the configured TTL)."""
    return _STRATEGY_TTLS.get(strategy, "{ttl} TTL").format(ttl=cache_ttl)


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

for _name, _strategy in _EXTRA_STRATEGIES.items():
    register_cache_strategy(_name, _strategy)
