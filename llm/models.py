"""The default model catalog: pure data, no IO.

Figures for real Claude models come from Anthropic's published documentation (§4.1 prices, §5.3
windows, §4 minimum cacheable prefix — the SKILL column, the most recent first-party source).
Models whose window the reference does not state are left out rather than guessed.

The `sim-claude-*` models exist only in the offline simulator. Their names contain "claude" so the
product's caching policy (SPEC §8: "enabled when the model is a Claude model") treats them like the
real thing, and their windows are small enough for tests and benchmarks to reach the thresholds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from llm.usage import Price


@dataclass(frozen=True)
class ModelInfo:
    name: str
    context_window: int
    max_output: int
    price: Price
    # Below this many prompt tokens up to a breakpoint nothing is cached (no error, just no write).
    min_cache_tokens: int = 1024
    display_name: str = ""
    simulated: bool = False
    aliases: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "context_window": self.context_window,
            "max_output": self.max_output,
            "price": self.price.as_dict(),
            "min_cache_tokens": self.min_cache_tokens,
            "display_name": self.display_name or self.name,
            "simulated": self.simulated,
            "aliases": list(self.aliases),
        }


def _m(name, window, max_out, price, min_cache, display, *, aliases=(), simulated=False) -> ModelInfo:
    return ModelInfo(name, window, max_out, price, min_cache, display, simulated, tuple(aliases))


_OPUS_45_PLUS = Price(5, 25, 6.25, 10, 0.50)
_SONNET_4 = Price(3, 15, 3.75, 6, 0.30)
_HAIKU_45 = Price(1, 5, 1.25, 2, 0.10)
_FABLE_5 = Price(10, 50, 12.50, 20, 1.0)

# Minimum cacheable prompt lengths: Anthropic's prompt-caching documentation as of late 2026
# (512: Fable 5; 1,024: Opus 4.8, Sonnet 5, Sonnet 4.6, Sonnet 4.5; 2,048: Opus 4.7; 4,096: Opus 4.6,
# Opus 4.5, Haiku 4.5). Windows and output caps: the models overview (1M / 128K for the 4.6+ family).
REAL_MODELS: tuple[ModelInfo, ...] = (
    _m("claude-opus-4-8", 1_000_000, 128_000, _OPUS_45_PLUS, 1024, "Claude Opus 4.8"),
    _m("claude-opus-4-7", 1_000_000, 128_000, _OPUS_45_PLUS, 2048, "Claude Opus 4.7"),
    _m("claude-opus-4-6", 1_000_000, 128_000, _OPUS_45_PLUS, 4096, "Claude Opus 4.6"),
    _m("claude-opus-4-5", 200_000, 64_000, _OPUS_45_PLUS, 4096, "Claude Opus 4.5",
       aliases=("claude-opus-4-5-20251101",)),
    _m("claude-sonnet-4-6", 1_000_000, 128_000, _SONNET_4, 1024, "Claude Sonnet 4.6"),
    _m("claude-sonnet-4-5", 200_000, 64_000, _SONNET_4, 1024, "Claude Sonnet 4.5",
       aliases=("claude-sonnet-4-5-20250929",)),
    _m("claude-haiku-4-5", 200_000, 64_000, _HAIKU_45, 4096, "Claude Haiku 4.5",
       aliases=("claude-haiku-4-5-20251001",)),
    # Sonnet 5: the reference gives base prices only; writes use the standard 1.25x / 2x multipliers.
    _m("claude-sonnet-5", 1_000_000, 128_000, Price(2, 10, 2.5, 4, 0.20), 1024, "Claude Sonnet 5"),
    _m("claude-fable-5", 1_000_000, 128_000, _FABLE_5, 512, "Claude Fable 5"),
)

# The model a conversation on the Anthropic route starts with when the admin's default is not on an
# available route: the 1M-window Sonnet, the documentation's recommended default for agents.
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"

SIMULATOR_MODELS: tuple[ModelInfo, ...] = (
    _m("sim-claude-32k", 32_000, 8_192, _SONNET_4, 1024, "Simulator Claude 32K", simulated=True),
    _m("sim-claude-64k", 64_000, 16_000, _SONNET_4, 1024, "Simulator Claude 64K", simulated=True),
    _m("sim-claude-200k", 200_000, 64_000, _SONNET_4, 1024, "Simulator Claude 200K", simulated=True),
    _m("sim-claude-1m", 1_000_000, 128_000, _SONNET_4, 1024, "Simulator Claude 1M", simulated=True),
)

DEFAULT_SIMULATOR_MODEL = "sim-claude-200k"
DEFAULT_MODELS: tuple[ModelInfo, ...] = REAL_MODELS + SIMULATOR_MODELS

_DATE_SUFFIX = re.compile(r"-\d{8}$")

# The window assumed for a model the catalogue does not know and no setting describes.
UNKNOWN_MODEL_WINDOW = 200_000


def undated(name: str) -> str:
    """A dated model id (`claude-sonnet-4-5-20250929`) without its date; other names unchanged."""
    return _DATE_SUFFIX.sub("", name)


class ModelCatalog:
    """Lookup by name or alias; dated ids (`…-20251101`) fall back to their undated family name."""

    def __init__(self, models: Iterable[ModelInfo] = DEFAULT_MODELS):
        self._models: dict[str, ModelInfo] = {}
        self._aliases: dict[str, str] = {}
        for m in models:
            self.add(m)

    def add(self, model: ModelInfo) -> None:
        self._models[model.name] = model
        for alias in model.aliases:
            self._aliases[alias] = model.name

    def get(self, name: str) -> ModelInfo | None:
        if name in self._models:
            return self._models[name]
        if name in self._aliases:
            return self._models[self._aliases[name]]
        return self._models.get(undated(name))

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def __iter__(self):
        return iter(self._models.values())

    def __len__(self) -> int:
        return len(self._models)

    def names(self) -> list[str]:
        return list(self._models)


def get_model(name: str) -> ModelInfo | None:
    return _DEFAULT_CATALOG.get(name)


_DEFAULT_CATALOG = ModelCatalog()


def model_from_mapping(data: Mapping[str, Any], base: ModelInfo | None = None) -> ModelInfo:
    """Build a model from a JSON-ish dict; fields not given come from `base` (or simulator defaults).

    Accepted keys: name, context_window, max_output, min_cache_tokens, display_name, aliases, and
    prices as `price: {input, output, cache_write_5m, cache_write_1h, cache_read}` (missing cache
    prices derive from `input` with the standard multipliers).
    """
    if "name" not in data:
        raise ValueError("model entry needs a 'name'")
    template = base or SIMULATOR_MODELS[2]
    price = template.price
    if "price" in data:
        p = dict(data["price"])
        base_in = float(p.get("input", price.input))
        price = Price(
            input=base_in,
            output=float(p.get("output", price.output)),
            cache_write_5m=float(p.get("cache_write_5m", base_in * 1.25)),
            cache_write_1h=float(p.get("cache_write_1h", base_in * 2)),
            cache_read=float(p.get("cache_read", base_in * 0.1)),
        )
    return replace(
        template,
        name=str(data["name"]),
        context_window=int(data.get("context_window", template.context_window)),
        max_output=int(data.get("max_output", template.max_output)),
        min_cache_tokens=int(data.get("min_cache_tokens", template.min_cache_tokens)),
        display_name=str(data.get("display_name", data["name"])),
        simulated=bool(data.get("simulated", True if base is None else template.simulated)),
        aliases=tuple(data.get("aliases", template.aliases if base is not None else ())),
        price=price,
    )


def catalog_from_json(text: str, base: Iterable[ModelInfo] = DEFAULT_MODELS) -> ModelCatalog:
    """`base` plus the models in `text` (a JSON list of model dicts, or a dict name -> fields).

    An entry whose name exists in `base` overrides only the fields it gives.
    """
    catalog = ModelCatalog(base)
    data = json.loads(text)
    entries = [{"name": k, **v} for k, v in data.items()] if isinstance(data, dict) else list(data)
    for entry in entries:
        catalog.add(model_from_mapping(entry, catalog.get(entry.get("name", ""))))
    return catalog


def model_label(name: str) -> str:
    """The catalogue's display name of a model, or the id itself for a model it does not know."""
    info = get_model(name)
    return (info.display_name or info.name) if info else name
