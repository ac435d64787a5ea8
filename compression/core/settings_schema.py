"""The shape of the runtime settings (SPEC §9): one frozen dataclass per group, where each group
lives in a Hermes-style ``config.yaml``, which fields are secret, and the error that names a setting.

Guarantees:
- Every config object is frozen; the auxiliary API key is left out of ``repr``.
- Defaults are SPEC §9's; the built-in engine and the default caching strategy are the names the
  engine registry and the caching registry use (imported, not repeated).
- ``ConfigValueError`` (a ``ValueError``) carries the group, the field, the dotted ``config.yaml``
  key and a message; ``.all`` holds every invalid field found together, so a form can mark each one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from compression.core.caching import DEFAULT_STRATEGY
from compression.core.compaction_timing import DEFAULT_IDLE_WHEN
from compression.core.registry import BUILTIN_ENGINE

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
    idle_compaction: bool = False
    idle_compaction_share: float = 0.70
    idle_compaction_when: str = DEFAULT_IDLE_WHEN
    defer_horizon_turns: int = 3


@dataclass(frozen=True)
class AuxiliaryConfig:
    """The summariser (``auxiliary.compression.*``)."""

    provider: str = "auto"
    model: str = ""
    base_url: str = ""
    timeout: int = 120
    api_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class CachingConfig:
    cache_ttl: str = "5m"
    strategy: str = DEFAULT_STRATEGY


@dataclass(frozen=True)
class ContextConfig:
    engine: str = BUILTIN_ENGINE
    recall_tools: bool = True  # the built-in compressor offers context_search / context_expand


@dataclass(frozen=True)
class ModelConfig:
    provider: str = "simulator"
    model: str = "sim-claude-200k"
    context_length: int | None = None  # None: the model's own window
    max_tokens: int = 4096
    base_url: str = ""  # an OpenAI-compatible endpoint: the `custom` route
    api_key: str = field(default="", repr=False)


@dataclass(frozen=True)
class AgentConfig:
    max_iterations: int = 30
    terminal_enabled: bool = False
    terminal_timeout: int = 30
    terminal_network: bool = False


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
SECRET_FIELDS = frozenset({("auxiliary", "api_key"), ("model", "api_key")})


def yaml_key(group: str, name: str) -> str:
    return ".".join((*YAML_SECTIONS[group], name))


def is_secret(group: str, name: str) -> bool:
    return (group, name) in SECRET_FIELDS


def config_values(config: Any) -> dict[str, Any]:
    """A config object's fields as a plain dict (secrets included: callers mask them)."""
    return {f.name: getattr(config, f.name) for f in fields(config)}


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


def raise_all(errors: list[ConfigValueError]) -> None:
    """Raise the first error carrying all of them in ``.all`` (nothing when the list is empty)."""
    if errors:
        first = errors[0]
        first.all = tuple(errors)
        raise first


def group_class(group: str) -> type:
    """The config class of ``group``; ``ConfigValueError`` for an unknown group."""
    if group not in GROUP_CLASSES:
        raise ConfigValueError(group, f"unknown settings group; known: {', '.join(GROUPS)}")
    return GROUP_CLASSES[group]


def group_fields(group: str) -> tuple[str, ...]:
    return tuple(f.name for f in fields(group_class(group)))
