"""Runtime configuration (SPEC §9): frozen dataclasses and the one validator behind every door.

The admin forms, the ``config.yaml`` import and the engine all build their config through
``build_group`` / ``build_runtime``, so a value is accepted or refused the same way everywhere and
the refusal names the valid range as SPEC §9 writes it.

Guarantees:
- Pure Python, standard library only (no Django, no YAML): importable by the engine and by tests in
  a bare interpreter.
- Every config object is frozen; the auxiliary API key is left out of ``repr``.
- An invalid value raises ``ConfigValueError`` (a ``ValueError``) carrying the group, the field, the
  dotted ``config.yaml`` key and a message; ``.all`` holds every invalid field of the group, so a
  form can mark each one. Values are never silently changed (``cache_ttl: 10m`` is an error, not 5m).
- Loose input is coerced the way YAML and HTML forms produce it ("0.5", "yes", "20"), nothing more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any
from urllib.parse import urlparse

# --- Choices ------------------------------------------------------------------------------------

ON_SUMMARY_FAILURE_CHOICES = ("abort", "fallback")
CODEX_APP_SERVER_MODES = ("native", "hermes", "off")
AUXILIARY_PROVIDERS = ("auto", "main", "anthropic", "openrouter", "nous", "custom", "simulator")
MODEL_PROVIDERS = ["simulator", "anthropic", "openrouter", "nous", "custom"]
CACHE_TTLS = ("5m", "1h")
# Prompt-caching strategy names accepted by the validator. Extend with ``register_strategy`` (or the
# engine's ``compression.core.caching.register_cache_strategy``, which is consulted as well).
STRATEGIES: list[str] = ["none", "system_and_3"]
DEFAULT_ENGINE = "compressor"
MINIMUM_MAIN_CONTEXT_LENGTH = 64_000
SECRET_FIELDS = frozenset({("auxiliary", "api_key")})
_ENGINE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_TEXT_MAX = 200


def register_strategy(name: str) -> None:
    """Make a caching strategy name valid for ``prompt_caching.strategy``."""
    if name not in STRATEGIES:
        STRATEGIES.append(name)


def known_strategies() -> list[str]:
    """``STRATEGIES`` plus whatever the caching module has registered (looked up lazily)."""
    names = list(STRATEGIES)
    try:
        from compression.core.caching import available_cache_strategies
    except ImportError:  # the caching module is optional for this validator
        return names
    for name in available_cache_strategies():
        if name not in names:
            names.append(name)
    return names


# --- Config objects -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CompressionConfig:
    enabled: bool = True
    threshold: float = 0.50
    target_ratio: float = 0.20
    protect_last_n: int = 20
    protect_first_n: int = 3
    hygiene_hard_message_limit: int = 5000
    max_compression_attempts: int = 3
    in_place: bool = False
    on_summary_failure: str = "abort"
    codex_gpt55_autoraise: bool = True
    codex_gpt55_autoraise_notice: bool = True
    codex_app_server_auto: str = "native"


@dataclass(frozen=True)
class AuxiliaryConfig:
    """The summariser (``auxiliary.compression.*``)."""

    provider: str = "auto"
    model: str = ""
    base_url: str = ""
    timeout: int = 120
    api_key: str = field(default="", repr=False)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key)


@dataclass(frozen=True)
class CachingConfig:
    cache_ttl: str = "5m"
    strategy: str = "system_and_3"


@dataclass(frozen=True)
class ContextConfig:
    engine: str = DEFAULT_ENGINE


@dataclass(frozen=True)
class ModelConfig:
    provider: str = "simulator"
    model: str = "sim-claude-200k"
    context_length: int | None = None  # None: the model's own window
    max_tokens: int = 4096


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = 30
    terminal_enabled: bool = False
    terminal_timeout: int = 30


@dataclass(frozen=True)
class RuntimeConfig:
    compression: CompressionConfig = field(default_factory=CompressionConfig)
    auxiliary: AuxiliaryConfig = field(default_factory=AuxiliaryConfig)
    caching: CachingConfig = field(default_factory=CachingConfig)
    context: ContextConfig = field(default_factory=ContextConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)


GROUP_CLASSES: dict[str, type] = {
    "compression": CompressionConfig,
    "auxiliary": AuxiliaryConfig,
    "caching": CachingConfig,
    "context": ContextConfig,
    "model": ModelConfig,
    "agent": AgentConfig,
}
GROUPS = tuple(GROUP_CLASSES)
# Where each group lives in a Hermes-style config.yaml.
YAML_SECTIONS: dict[str, tuple[str, ...]] = {
    "compression": ("compression",),
    "auxiliary": ("auxiliary", "compression"),
    "caching": ("prompt_caching",),
    "context": ("context",),
    "model": ("model",),
    "agent": ("agent",),
}


def group_fields(group: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(_group_class(group)))


def yaml_key(group: str, name: str) -> str:
    return ".".join((*YAML_SECTIONS[group], name))


def is_secret(group: str, name: str) -> bool:
    return (group, name) in SECRET_FIELDS


# --- Errors -------------------------------------------------------------------------------------


class ConfigValueError(ValueError):
    """An invalid setting. ``message`` names the valid range; ``str()`` prefixes the dotted key."""

    def __init__(self, field: str, message: str, *, group: str | None = None):
        self.field = field
        self.message = message
        self.group = group
        self.all: tuple[ConfigValueError, ...] = (self,)
        super().__init__(f"{self.key}: {message}")

    @property
    def key(self) -> str:
        return yaml_key(self.group, self.field) if self.group in YAML_SECTIONS else self.field


# --- Field specifications -----------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSpec:
    """How one setting is parsed and checked. ``valid`` is SPEC §9's wording of the valid range."""

    kind: str  # bool | int | float | str | choice | url | optional_int
    valid: str | None  # None: the choices, listed
    help: str
    check: Callable[[Any], bool] = lambda v: True
    choices: Callable[[], tuple[str, ...] | list[str]] | None = None


def _between(lo, hi):
    return lambda v: lo <= v <= hi


def _at_least(lo):
    return lambda v: v >= lo


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
                               "triggers. Default 0.50; never below 64,000 tokens (85 % of a window that small).",
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
                              "Custom OpenAI-compatible endpoint; takes precedence over the provider.", _http_url),
        "timeout": FieldSpec("int", "5–900 seconds", "Summariser call timeout in seconds. Default 120.",
                             _between(5, 900)),
        "api_key": FieldSpec("str", "text of at most 500 characters",
                             "Key for the endpoint. Write-only: never shown again.", lambda v: len(v) <= 500),
    },
    "caching": {
        "cache_ttl": FieldSpec("choice", "5m / 1h",
                               "Anthropic cache lifetime. 1h writes cost 2× input (5m: 1.25×) but survive "
                               "longer pauses.", choices=lambda: CACHE_TTLS),
        "strategy": FieldSpec("choice", None,
                              "Where cache breakpoints go. system_and_3: the system prompt and the last 3 "
                              "messages (Hermes' rule). warm_anchor: 1h on the system prompt, the "
                              "compaction summary and the previous request's end, the TTL above on the newest "
                              "message (cheapest in bench/cache_economics.py). stable_prefix: 1h on the "
                              "system prompt and summary. tools_and_3: the tool schemas instead of the "
                              "system prompt. none: no breakpoints.", choices=known_strategies),
    },
    "context": {
        "engine": FieldSpec("str", "a registered or plugin engine name",
                            "Context engine; an unknown name falls back to the built-in compressor with a "
                            "warning. Default compressor.", _engine_name),
    },
    "model": {
        "provider": FieldSpec("choice", None,
                              "Provider of the main model for new conversations.",
                              choices=lambda: MODEL_PROVIDERS),
        "model": FieldSpec("str", "a model name (at most 200 characters)", "Main model for new conversations.",
                           _non_empty_text),
        "context_length": FieldSpec("optional_int", "empty or ≥ 64,000",
                                    "Overrides the model's context window; a window under 64,000 tokens is "
                                    "refused.", _at_least(MINIMUM_MAIN_CONTEXT_LENGTH)),
        "max_tokens": FieldSpec("int", "≥ 1", "Output tokens reserved per reply (subtracted from the window).",
                                _at_least(1)),
    },
    "agent": {
        "max_iterations": FieldSpec("int", "1–200", "Model calls per turn at most. Default 30.", _between(1, 200)),
        "terminal_enabled": FieldSpec("bool", "true or false",
                                      "Offer the terminal tool (runs commands in the conversation workspace)."),
        "terminal_timeout": FieldSpec("int", "1–600 seconds", "Terminal command timeout in seconds.",
                                      _between(1, 600)),
    },
}

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def valid_range(group: str, name: str) -> str:
    """SPEC §9's wording of the valid values of one setting (choices listed when they can grow)."""
    spec = _spec(group, name)
    return spec.valid or ", ".join(spec.choices())


def _invalid(group: str, name: str, spec: FieldSpec, value: Any) -> ConfigValueError:
    valid = valid_range(group, name)
    if is_secret(group, name):
        got = ""  # never echo a secret, not even in an error
    elif value is None or (isinstance(value, str) and not value.strip()):
        got = "; it is empty"
    else:
        shown = repr(value)
        got = f"; got {shown[:60] + '…' if len(shown) > 60 else shown}"
    if spec.kind == "choice":
        message = f"must be one of {valid}{got}"
    elif spec.kind in ("int", "optional_int") and name == "context_length":
        message = (f"must be {valid}{got} (a main model window under 64,000 tokens is refused; "
                   f"leave it empty to use the model's own window)")
    elif spec.kind in ("int", "optional_int"):
        message = f"must be a whole number {valid}{got}"
    elif spec.kind == "float":
        message = f"must be a number {valid}{got}"
    else:
        message = f"must be {valid}{got}"
    return ConfigValueError(name, message, group=group)


def _coerce(kind: str, value: Any) -> Any:
    """Parse ``value`` into the field's type; raise ``ValueError`` if it cannot be read as one."""
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError
    if kind in ("int", "optional_int"):
        if kind == "optional_int" and (value is None or (isinstance(value, str) and not value.strip())):
            return None
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, int):
            return value
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            return int(value.strip().replace("_", "").replace(",", ""))
        raise ValueError
    if kind == "float":
        if isinstance(value, bool):
            raise ValueError
        number = float(value.strip()) if isinstance(value, str) else float(value)
        if not math.isfinite(number):
            raise ValueError
        return number
    if kind == "choice" and isinstance(value, bool):
        return "on" if value else "off"  # YAML 1.1 reads an unquoted off/on as a boolean
    # str, choice, url
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError
    return value.strip() if kind in ("choice", "url") else value


def validate_value(group: str, name: str, value: Any) -> Any:
    """The typed value of one setting, or ``ConfigValueError`` naming its valid range."""
    spec = _spec(group, name)
    try:
        typed = _coerce(spec.kind, value)
    except (TypeError, ValueError):
        raise _invalid(group, name, spec, value) from None
    if spec.kind == "choice":
        ok = typed in spec.choices()
    elif typed is None:
        ok = spec.kind == "optional_int"
    else:
        ok = spec.check(typed)
    if not ok:
        raise _invalid(group, name, spec, value)
    return typed


def build_group(group: str, values: Mapping[str, Any] | None = None, *, base: Any = None):
    """The frozen config of ``group``: ``base`` (default: the defaults) with ``values`` applied.

    Every given value is validated; all invalid ones are reported together through ``.all`` of the
    raised ``ConfigValueError``. An unknown field is an error too.
    """
    cls = _group_class(group)
    current = base if base is not None else cls()
    errors: list[ConfigValueError] = []
    typed: dict[str, Any] = {}
    names = set(group_fields(group))
    for name, value in (values or {}).items():
        if name not in names:
            errors.append(ConfigValueError(name, f"unknown setting; known: {', '.join(sorted(names))}",
                                           group=group))
            continue
        try:
            typed[name] = validate_value(group, name, value)
        except ConfigValueError as exc:
            errors.append(exc)
    if errors:
        first = errors[0]
        first.all = tuple(errors)
        raise first
    return replace(current, **typed)


def validate_group(group: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Typed values for the given fields of ``group`` (``ConfigValueError`` if any is invalid)."""
    config = build_group(group, values)
    return {name: getattr(config, name) for name in values}


def build_compression(values: Mapping[str, Any] | None = None, **kw) -> CompressionConfig:
    return build_group("compression", {**(values or {}), **kw})


def build_auxiliary(values: Mapping[str, Any] | None = None, **kw) -> AuxiliaryConfig:
    return build_group("auxiliary", {**(values or {}), **kw})


def build_caching(values: Mapping[str, Any] | None = None, **kw) -> CachingConfig:
    return build_group("caching", {**(values or {}), **kw})


def build_context(values: Mapping[str, Any] | None = None, **kw) -> ContextConfig:
    return build_group("context", {**(values or {}), **kw})


def build_model(values: Mapping[str, Any] | None = None, **kw) -> ModelConfig:
    return build_group("model", {**(values or {}), **kw})


def build_agent(values: Mapping[str, Any] | None = None, **kw) -> AgentConfig:
    return build_group("agent", {**(values or {}), **kw})


def build_runtime(groups: Mapping[str, Mapping[str, Any]] | None = None, *, base: RuntimeConfig | None = None
                  ) -> RuntimeConfig:
    """A ``RuntimeConfig`` from ``{group: {field: value}}`` over ``base``; every group is checked.

    The raised ``ConfigValueError.all`` lists the invalid fields of every group.
    """
    base = base or RuntimeConfig()
    errors: list[ConfigValueError] = []
    built: dict[str, Any] = {}
    for group, values in (groups or {}).items():
        try:
            built[group] = build_group(group, values, base=getattr(base, _checked_group(group)))
        except ConfigValueError as exc:
            errors.extend(exc.all)
    if errors:
        first = errors[0]
        first.all = tuple(errors)
        raise first
    return replace(base, **built)


def check_main_window(context_length: int) -> int:
    """Refuse a main model whose window is under 64,000 tokens (SPEC §4); return it otherwise.

    For the resolved window (the override or the model's own); ``str()`` of the error starts with
    ``model.context_length``.
    """
    if context_length < MINIMUM_MAIN_CONTEXT_LENGTH:
        raise ConfigValueError(
            "context_length",
            f"the main model's context window is {context_length:,} tokens; at least "
            f"{MINIMUM_MAIN_CONTEXT_LENGTH:,} is required. Choose a larger model or set "
            f"model.context_length to {MINIMUM_MAIN_CONTEXT_LENGTH:,} or more",
            group="model",
        )
    return context_length


def config_values(config: Any) -> dict[str, Any]:
    """A config object's fields as a plain dict (secrets included: callers mask them)."""
    return {f.name: getattr(config, f.name) for f in fields(config)}


def _checked_group(group: str) -> str:
    if group not in GROUP_CLASSES:
        raise ConfigValueError(group, f"unknown settings group; known: {', '.join(GROUPS)}")
    return group


def _group_class(group: str) -> type:
    return GROUP_CLASSES[_checked_group(group)]


def _spec(group: str, name: str) -> FieldSpec:
    specs = SPECS[_checked_group(group)]
    if name not in specs:
        raise ConfigValueError(name, f"unknown setting; known: {', '.join(sorted(specs))}", group=group)
    return specs[name]


# --- Codex app-server compaction (SPEC §9; Hermes Agent's codex app-server route) --------------------------------


@dataclass(frozen=True)
class CodexAppServerDecision:
    """What a Codex app-server route does about compaction.

    ``run_preflight``: the turn-prologue preflight check runs (only in ``hermes`` mode).
    ``compact_thread``: this ``compress`` call asks the Codex thread to compact itself.
    ``record_native``: compactions Codex starts on its own are recorded (``native`` mode).
    """

    mode: str
    run_preflight: bool
    compact_thread: bool
    record_native: bool
    reason: str


def decide_codex_app_server(mode: str, *, force: bool = False, has_live_thread: bool = True
                            ) -> CodexAppServerDecision:
    """The ``codex_app_server_auto`` decision. An unknown mode is treated as ``native`` (as built).

    - preflight runs only in ``hermes`` mode (skipped in ``native`` and ``off``);
    - a non-forced compression outside ``hermes`` mode is skipped (Codex owns the context);
    - a forced (manual) compression compacts the thread in every mode;
    - without a live Codex thread nothing is compacted.
    """
    if mode not in CODEX_APP_SERVER_MODES:
        mode = "native"
    run_preflight = mode == "hermes"
    record_native = mode == "native"
    if not has_live_thread:
        return CodexAppServerDecision(mode, run_preflight, False, record_native, "no live Codex thread")
    if not force and mode != "hermes":
        return CodexAppServerDecision(mode, run_preflight, False, record_native,
                                      f"skipped: codex_app_server_auto is {mode}")
    return CodexAppServerDecision(mode, run_preflight, True, record_native,
                                  "forced compaction" if force else "hermes-triggered compaction")
