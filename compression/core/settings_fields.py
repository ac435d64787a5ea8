"""What each setting accepts and how it is described (SPEC §9): one ``FieldSpec`` per field.

``SPECS[group][name]`` gives the field's kind (how loose input is read), SPEC §9's wording of its
valid range, the help text the admin shows, the range check and, for a choice, where the choices
come from. Choices that can grow (caching strategies) are read from their registry on every call.
Pure standard library.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from compression.core.caching import DEFAULT_STRATEGY, VALID_TTLS, available_cache_strategies
from compression.core.codex_app_server import CODEX_APP_SERVER_MODES
from compression.core.compaction_timing import IDLE_WHEN_CHOICES
from compression.core.settings_schema import ConfigValueError, group_class
from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH

ON_SUMMARY_FAILURE_CHOICES = ("abort", "fallback")
AUXILIARY_PROVIDERS = ("auto", "main", "anthropic", "openrouter", "nous", "custom", "simulator")
MODEL_PROVIDERS = ("simulator", "anthropic", "openrouter", "nous", "custom")
_ENGINE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_TEXT_MAX = 200


def known_strategies() -> list[str]:
    """The names ``prompt_caching.strategy`` accepts: the caching registry's, ``none`` and the
    default first, then the others alphabetically (the order the admin's select lists them in)."""
    return sorted(available_cache_strategies(), key=lambda name: (name != "none", name != DEFAULT_STRATEGY, name))


@dataclass(frozen=True)
class FieldSpec:
    """How one setting is parsed and checked. ``valid`` is SPEC §9's wording of the valid range."""

    kind: str  # bool | int | float | str | choice | url | optional_int
    valid: str | None  # None: the choices, listed
    help: str
    check: Callable[[Any], bool] = lambda v: True
    choices: Callable[[], tuple[str, ...] | list[str]] | None = None

    def options(self) -> tuple[str, ...] | list[str]:
        """The choices of a ``choice`` setting, read now (they can grow); TypeError for any other kind."""
        if self.choices is None:
            raise TypeError(f"a {self.kind!r} setting has no choices")
        return self.choices()


def _between(lo: float, hi: float) -> Callable[[Any], bool]:
    return lambda v: bool(lo <= v <= hi)


def _at_least(lo: float) -> Callable[[Any], bool]:
    return lambda v: bool(v >= lo)


def _engine_name(v: str) -> bool:
    return bool(_ENGINE_NAME.match(v))


def _http_url(v: str) -> bool:
    if not v:
        return True
    if any(c.isspace() for c in v):
        return False
    try:
        parts = urlparse(v)
        port_ok = parts.port is None or parts.port > 0  # .port raises ValueError when malformed
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port_ok


def _non_empty_text(v: str) -> bool:
    return bool(v.strip()) and len(v) <= _TEXT_MAX


def _text(v: str) -> bool:
    return len(v) <= _TEXT_MAX


SPECS: dict[str, dict[str, FieldSpec]] = {
    "compression": {
        "enabled": FieldSpec("bool", "true or false",
                             "Automatic compression, gateway hygiene and overflow recovery. Off: an overflow "
                             "ends the turn with an error and manual /compress refuses."),
        "threshold": FieldSpec("float", "0.0–1.0 (exclusive of 0)",
                               "Share of the usable window (context length − max tokens) at which compression "
                               f"triggers. Default 0.50; never below {MINIMUM_CONTEXT_LENGTH:,} tokens (85 % of a "
                               "window that small).",
                               lambda v: 0.0 < v <= 1.0),
        "target_ratio": FieldSpec("float", "0.10–0.80",
                                  "Share of the threshold kept verbatim as the recent tail. Default 0.20.",
                                  _between(0.10, 0.80)),
        "protect_last_n": FieldSpec("int", "≥ 1",
                                    "Most recent messages never pruned. Default 20.", _at_least(1)),
        "protect_first_n": FieldSpec("int", "≥ 0",
                                     "Messages after the system prompt kept on the first compression only. "
                                     "Default 3.", _at_least(0)),
        "hygiene_hard_message_limit": FieldSpec("int", "≥ 4",
                                                "Gateway hygiene compacts a conversation with this many messages "
                                                "even under 85 % of the window. Default 5000.", _at_least(4)),
        "idle_compaction": FieldSpec("bool", "true or false",
                                     "Cache-aware timing. On: a conversation that returns after a pause longer "
                                     "than its longest prompt-cache entry, at or above the idle share of the "
                                     "threshold, is compacted before the turn (the cache is cold, so the "
                                     "compaction costs no extra cache write); while the cache is warm an early "
                                     "compaction waits for the next break or the threshold. Default off: with rolling_1h it lowers the "
                                     "bill only by compacting earlier (idle_compaction_when at_share), which keeps "
                                     "less verbatim; README, Cache economics."),
        "idle_compaction_share": FieldSpec("float", "0.10–0.99",
                                           "Share of the threshold from which a return after the cache expired "
                                           "compacts the conversation. Default 0.70.", _between(0.10, 0.99)),
        "idle_compaction_when": FieldSpec("choice", "due_this_turn / at_share",
                                          "Which cold returns at or above the idle share compact. "
                                          "due_this_turn (default): only one whose projection plus the growth "
                                          "expected within the turn (its tool results, at the recent rate) "
                                          "reaches the threshold: a compaction that would come during the turn, "
                                          "with the cache warm again, moved to the cold moment. at_share: every "
                                          "one: more compactions, less held after a break, a lower bill and "
                                          "less kept verbatim (README, Cache economics).",
                                          choices=lambda: IDLE_WHEN_CHOICES),
        "defer_horizon_turns": FieldSpec("int", "0–20",
                                         "How near the threshold (in turns, at the recent growth) a warm "
                                         "conversation counts as about to compact, which the feed reports as a "
                                         "deferral. Default 3.", _between(0, 20)),
        "max_compression_attempts": FieldSpec("int", "1–10",
                                              "Compress-and-retry attempts per turn after a context overflow. "
                                              "Default 3.", _between(1, 10)),
        "in_place": FieldSpec("bool", "true or false",
                              "On: archive the old messages in the same session. Off (default): end the session "
                              "and continue in a child session. Gateway hygiene always compacts in place."),
        "on_summary_failure": FieldSpec("choice", "abort / fallback",
                                        "abort (default): keep the messages unchanged and start a cooldown. "
                                        "fallback: insert a deterministic local summary.",
                                        choices=lambda: ON_SUMMARY_FAILURE_CHOICES),
        "codex_gpt55_autoraise": FieldSpec("bool", "true or false",
                                           "Raise the threshold to 0.85 for gpt-5.4/5.5/5.6 on openai-codex "
                                           "(never lowers it)."),
        "codex_gpt55_autoraise_notice": FieldSpec("bool", "true or false",
                                                  "Show the one-time notice explaining the autoraise."),
        "codex_app_server_auto": FieldSpec("choice", "native / hermes / off",
                                           "Codex app-server compaction: native (Codex compacts), hermes "
                                           "(Hermes triggers it) or off. Stored only; no Codex route is offered.",
                                           choices=lambda: CODEX_APP_SERVER_MODES),
    },
    "auxiliary": {
        "provider": FieldSpec("choice", "auto, main, anthropic, openrouter, nous, custom, simulator",
                              "Provider of the summariser. auto: the main provider and model first.",
                              choices=lambda: AUXILIARY_PROVIDERS),
        "model": FieldSpec("str", "text of at most 200 characters (empty: auto-detect)",
                           "Summariser model name.", _text),
        "base_url": FieldSpec("url", "empty or an http(s) URL",
                              "The summariser's endpoint: required for custom (an OpenAI-compatible server); for "
                              "anthropic, openrouter and nous it replaces the route's default URL; not used "
                              "with auto, main or simulator.", _http_url),
        "timeout": FieldSpec("int", "5–900 seconds", "Summariser call timeout in seconds. Default 120.",
                             _between(5, 900)),
        "api_key": FieldSpec("str", "text of at most 500 characters",
                             "Key for the endpoint. Write-only: never shown again.", lambda v: len(v) <= 500),
    },
    "caching": {
        "cache_ttl": FieldSpec("choice", "5m / 1h",
                               "Anthropic cache lifetime. 1h writes cost 2× input (5m: 1.25×) but survive "
                               "longer pauses. system_and_3 at 1h bills 0.862 / 0.962 of system_and_3 at 5m "
                               "on bench/cache_economics.py's two replays.", choices=lambda: VALID_TTLS),
        "strategy": FieldSpec("choice", None,
                              "Where cache breakpoints go; input cost against system_and_3 on "
                              "bench/cache_economics.py's two replays (steady / bursty) under Anthropic's "
                              "documented caching rules. rolling_1h (default): after tool results 1h on the "
                              "system prompt and the model's newest reply, the TTL above on the tool results; "
                              "a turn's first request and the first after a compression as system_and_3 — "
                              "0.718 / 0.748. system_and_3: the system prompt and the last 3 messages "
                              "(Hermes' rule) — 1.000. stable_prefix: 1h on the system prompt and summary — "
                              "0.997 / 0.998. warm_anchor: 1h on the system prompt, summary and previous "
                              "request's end — 1.126 / 1.021 (0.753 / 0.874 only if re-marking a cached "
                              "prefix 1h were free, which the documentation does not state). tools_and_3: the "
                              "tool schemas instead of the system prompt — 1.000 / 1.000. none: no "
                              "breakpoints — 4.49 / 3.65.", choices=known_strategies),
    },
    "context": {
        "engine": FieldSpec("str", "a registered or plugin engine name",
                            "Context engine: compressor (the built-in, default) or lcm (the compressor plus an "
                            "anchor index in each summary and context_search / context_expand tools over "
                            "everything compacted), or a plugin that loads here. The admin and config.yaml import "
                            "refuse any other name; one stored earlier falls back to the built-in compressor "
                            "with a warning.", _engine_name),
        "recall_tools": FieldSpec("bool", "true or false",
                                  "Offer the agent context_search / context_expand (search everything compacted "
                                  "in its conversation, read the originals verbatim) with the built-in "
                                  "compressor, and say so in each summary. Default on; a change applies from "
                                  "the next turn. lcm always offers them: they are what it is for."),
    },
    "model": {
        "provider": FieldSpec("choice", None,
                              "Provider of the main model for new conversations.",
                              choices=lambda: MODEL_PROVIDERS),
        "model": FieldSpec("str", "a model name (at most 200 characters)", "Main model for new conversations.",
                           _non_empty_text),
        "context_length": FieldSpec("optional_int", f"empty or ≥ {MINIMUM_CONTEXT_LENGTH:,}",
                                    f"Overrides the model's context window; a window under {MINIMUM_CONTEXT_LENGTH:,} "
                                    "tokens is refused.", _at_least(MINIMUM_CONTEXT_LENGTH)),
        "max_tokens": FieldSpec("int", "≥ 1", "Output tokens reserved per reply (subtracted from the window).",
                                _at_least(1)),
        "base_url": FieldSpec("url", "empty or an http(s) URL",
                              "An OpenAI-compatible endpoint (vLLM, llama.cpp server, Ollama, OpenRouter) "
                              "offered as the custom route with the model above; give its window in "
                              "context length.", _http_url),
        "api_key": FieldSpec("str", "text of at most 500 characters",
                             "Key for that endpoint. Write-only: never shown again.", lambda v: len(v) <= 500),
    },
    "agent": {
        "max_iterations": FieldSpec("int", "1–200", "Model calls per turn at most. Default 30.", _between(1, 200)),
        "terminal_enabled": FieldSpec("bool", "true or false",
                                      "Offer the terminal tool (runs commands in the conversation workspace)."),
        "terminal_timeout": FieldSpec("int", "1–600 seconds", "Terminal command timeout in seconds.",
                                      _between(1, 600)),
        "terminal_network": FieldSpec("bool", "true or false",
                                      "Let sandboxed terminal commands reach the network. Off (default): "
                                      "no network inside the sandbox."),
    },
}


def field_spec(group: str, name: str) -> FieldSpec:
    """The spec of one setting; ``ConfigValueError`` for an unknown group or field."""
    group_class(group)
    specs = SPECS[group]
    if name not in specs:
        raise ConfigValueError(name, f"unknown setting; known: {', '.join(sorted(specs))}", group=group)
    return specs[name]


def valid_range(group: str, name: str) -> str:
    """SPEC §9's wording of the valid values of one setting (choices listed when they can grow)."""
    spec = field_spec(group, name)
    return spec.valid or ", ".join(spec.options())
