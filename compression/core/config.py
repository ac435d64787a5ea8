"""Runtime configuration (SPEC §9): the settings' public names in one place.

The admin forms, the ``config.yaml`` import and the engine all build their config through
``build_group`` / ``build_runtime``, so a value is accepted or refused the same way everywhere and
the refusal names the valid range as SPEC §9 writes it. The parts live in modules by job:

- ``settings_schema``: the frozen config dataclasses, the groups, their ``config.yaml`` keys, the
  secret fields and ``ConfigValueError``;
- ``settings_fields``: what each field accepts (``FieldSpec``, ``SPECS``) and its help text;
- ``settings_coerce``: reading loose YAML and form input into a field's type;
- ``settings_validate``: the validator and the builders;
- ``codex_app_server``: the ``codex_app_server_auto`` decision.

Pure: the standard library and other ``compression.core`` modules only (no Django, no YAML), so
the engine and tests import it in a bare interpreter. Caching strategies are the caching registry's (``compression.core.caching``); the
minimum main window is ``compression.core.thresholds.MINIMUM_CONTEXT_LENGTH``.
"""

from __future__ import annotations

from compression.core.codex_app_server import (
    CODEX_APP_SERVER_MODES,
    CodexAppServerDecision,
    decide_codex_app_server,
)
from compression.core.settings_fields import (
    AUXILIARY_PROVIDERS,
    MODEL_PROVIDERS,
    ON_SUMMARY_FAILURE_CHOICES,
    SPECS,
    FieldSpec,
    known_strategies,
    valid_range,
)
from compression.core.settings_schema import (
    GROUP_CLASSES,
    GROUPS,
    SECRET_FIELDS,
    YAML_SECTIONS,
    AgentConfig,
    AuxiliaryConfig,
    CachingConfig,
    CompressionConfig,
    ConfigValueError,
    ContextConfig,
    ModelConfig,
    RuntimeConfig,
    config_values,
    group_fields,
    is_secret,
    yaml_key,
)
from compression.core.settings_validate import (
    STORABLE_INT_MAX,
    build_auxiliary,
    build_caching,
    build_compression,
    build_group,
    build_runtime,
    check_main_window,
    validate_value,
)

__all__ = [
    "AUXILIARY_PROVIDERS",
    "CODEX_APP_SERVER_MODES",
    "GROUPS",
    "GROUP_CLASSES",
    "MODEL_PROVIDERS",
    "ON_SUMMARY_FAILURE_CHOICES",
    "SECRET_FIELDS",
    "SPECS",
    "STORABLE_INT_MAX",
    "YAML_SECTIONS",
    "AgentConfig",
    "AuxiliaryConfig",
    "CachingConfig",
    "CodexAppServerDecision",
    "CompressionConfig",
    "ConfigValueError",
    "ContextConfig",
    "FieldSpec",
    "ModelConfig",
    "RuntimeConfig",
    "build_auxiliary",
    "build_caching",
    "build_compression",
    "build_group",
    "build_runtime",
    "check_main_window",
    "config_values",
    "decide_codex_app_server",
    "group_fields",
    "is_secret",
    "known_strategies",
    "valid_range",
    "validate_value",
    "yaml_key",
]
