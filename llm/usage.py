"""Normalised token usage and its cost (SPEC §3.3).

Every provider call yields one `Usage`. Providers disagree on what "input" means: Anthropic's
`input_tokens` excludes cached tokens, OpenAI-style `prompt_tokens` includes them. The normalisers
here hide that, so `Usage.prompt_tokens` is always the full prompt the model saw
(input + cache_read + cache_write) — the number that drives compression.

Pure Python, no SDK imports: the normalisers accept plain dicts or SDK objects (anything with
`model_dump()` or attributes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PER_MILLION = 1_000_000


@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_5m: int = 0
    cache_write_1h: int = 0
    reasoning: int = 0

    @property
    def prompt_tokens(self) -> int:
        """The canonical prompt size: what triggers compression and fills the gauge."""
        return self.input + self.cache_read + self.cache_write

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            cache_write_5m=self.cache_write_5m + other.cache_write_5m,
            cache_write_1h=self.cache_write_1h + other.cache_write_1h,
            reasoning=self.reasoning + other.reasoning,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "reasoning": self.reasoning,
            "prompt_tokens": self.prompt_tokens,
        }


def _as_mapping(obj: Any) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    return {k: getattr(obj, k) for k in dir(obj) if not k.startswith("_")}


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def normalize_anthropic_usage(raw: Any) -> Usage:
    """Anthropic Messages usage: `input_tokens` already excludes cache reads and writes.

    When the TTL breakdown (`cache_creation.ephemeral_5m/1h_input_tokens`) is missing, writes are
    attributed to 5m, the API's default TTL.
    """
    u = _as_mapping(raw)
    write = _int(u.get("cache_creation_input_tokens"))
    breakdown = _as_mapping(u.get("cache_creation"))
    w5 = _int(breakdown.get("ephemeral_5m_input_tokens"))
    w1 = _int(breakdown.get("ephemeral_1h_input_tokens"))
    if not breakdown and write:
        w5 = write
    details = _as_mapping(u.get("output_tokens_details"))
    return Usage(
        input=_int(u.get("input_tokens")),
        output=_int(u.get("output_tokens")),
        cache_read=_int(u.get("cache_read_input_tokens")),
        cache_write=write,
        cache_write_5m=w5,
        cache_write_1h=w1,
        reasoning=_int(details.get("reasoning_tokens")),
    )


def normalize_openai_usage(raw: Any) -> Usage:
    """OpenAI-style chat usage (OpenRouter, Nous, custom endpoints): `prompt_tokens` includes cache.

    Reads: `prompt_tokens_details.cached_tokens`, else a top-level `cache_read_input_tokens`.
    Writes: `prompt_tokens_details.cache_write_tokens`, else `cache_creation_input_tokens`.
    OpenRouter reports no TTL breakdown, so writes count as 5m (the only TTL it defaults to).
    """
    u = _as_mapping(raw)
    prompt = _int(u.get("prompt_tokens"))
    details = _as_mapping(u.get("prompt_tokens_details"))
    read = _int(details.get("cached_tokens")) or _int(u.get("cache_read_input_tokens"))
    write = _int(details.get("cache_write_tokens")) or _int(u.get("cache_creation_input_tokens"))
    completion = _as_mapping(u.get("completion_tokens_details"))
    return Usage(
        input=max(0, prompt - read - write),
        output=_int(u.get("completion_tokens")),
        cache_read=read,
        cache_write=write,
        cache_write_5m=write,
        cache_write_1h=0,
        reasoning=_int(completion.get("reasoning_tokens")),
    )


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cache_write_5m: float
    cache_write_1h: float
    cache_read: float

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Price:
        return cls(
            input=float(data.get("input", 0)),
            output=float(data.get("output", 0)),
            cache_write_5m=float(data.get("cache_write_5m", 0)),
            cache_write_1h=float(data.get("cache_write_1h", 0)),
            cache_read=float(data.get("cache_read", 0)),
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_write_5m": self.cache_write_5m,
            "cache_write_1h": self.cache_write_1h,
            "cache_read": self.cache_read,
        }


@dataclass(frozen=True)
class Cost:
    """`cost` is what the call cost; `no_cache_cost` what it would have cost without caching."""

    cost: float
    no_cache_cost: float

    @property
    def saved(self) -> float:
        """Negative when writes cost more than reads saved (a cold cache)."""
        return self.no_cache_cost - self.cost


def compute_cost(usage: Usage, price: Price | Mapping[str, Any]) -> Cost:
    if not isinstance(price, Price):
        price = Price.from_mapping(price)
    # Writes without a TTL breakdown (cache_write > 5m + 1h) are billed at the 5m rate.
    unattributed = max(0, usage.cache_write - usage.cache_write_5m - usage.cache_write_1h)
    cost = (
        usage.input * price.input
        + usage.output * price.output
        + (usage.cache_write_5m + unattributed) * price.cache_write_5m
        + usage.cache_write_1h * price.cache_write_1h
        + usage.cache_read * price.cache_read
    ) / PER_MILLION
    no_cache = (usage.prompt_tokens * price.input + usage.output * price.output) / PER_MILLION
    return Cost(cost=cost, no_cache_cost=no_cache)
