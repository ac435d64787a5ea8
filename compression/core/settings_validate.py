"""The one validator behind every door (SPEC §9): admin forms, the ``config.yaml`` import, the engine.

``validate_value`` reads one loose value (``settings_coerce``) and checks it against its
``FieldSpec``; ``build_group`` / ``build_runtime`` turn ``{field: value}`` mappings into frozen
config objects, so a value is accepted or refused the same way everywhere.

Guarantees:
- An invalid value raises ``ConfigValueError`` whose message names the valid range as SPEC §9 writes
  it; ``.all`` holds every invalid field of the call. Values are never silently changed
  (``cache_ttl: 10m`` is an error, not 5m); an unknown field or group is an error too.
- A whole number must also fit the settings columns (``STORABLE_INT_MAX``: what an IntegerField
  holds on every supported database), so a huge integer gets a range error here instead of an
  error from the database.
- An error shows at most a short excerpt of the refused value, built without rendering the whole
  value (a nested value from YAML can be enormous), and never shows a secret.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from compression.core.settings_coerce import coerce
from compression.core.settings_fields import FieldSpec, field_spec, valid_range
from compression.core.settings_schema import (
    AuxiliaryConfig,
    CachingConfig,
    CompressionConfig,
    ConfigValueError,
    RuntimeConfig,
    group_class,
    group_fields,
    is_secret,
    raise_all,
)
from compression.core.thresholds import MINIMUM_CONTEXT_LENGTH

# IntegerField is 32-bit on PostgreSQL (SQLite holds 64 bits): the range every backend can store.
STORABLE_INT_MIN, STORABLE_INT_MAX = -(2**31), 2**31 - 1
_SHOWN_MAX = 60
_INT_KINDS = ("int", "optional_int")

_excerpt_repr = reprlib.Repr()
_excerpt_repr.maxlevel = 4
_excerpt_repr.maxlist = _excerpt_repr.maxtuple = _excerpt_repr.maxdict = _excerpt_repr.maxset = 4
_excerpt_repr.maxstring = _excerpt_repr.maxother = _SHOWN_MAX


def excerpt(value: Any) -> str:
    """``repr(value)`` cut to about 60 characters, at a cost independent of the value's size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * _SHOWN_MAX:
        # repr() of a long int is slow, and refused past sys.get_int_max_str_digits() digits.
        return f"a number of about {int(math.log10(abs(value))) + 1:,} digits"
    shown = _excerpt_repr.repr(value)
    return shown[:_SHOWN_MAX] + "…" if len(shown) > _SHOWN_MAX else shown


def _invalid(group: str, name: str, spec: FieldSpec, value: Any, *, beyond_storage: bool = False
             ) -> ConfigValueError:
    valid = valid_range(group, name)
    if is_secret(group, name):
        got = ""  # never echo a secret, not even in an error
    elif value is None or (isinstance(value, str) and not value.strip()):
        got = "; it is empty"
    else:
        got = f"; got {excerpt(value)}"
    if beyond_storage:
        number = "a whole number " if spec.kind == "int" else ""
        message = f"must be {number}{valid} and at most {STORABLE_INT_MAX:,}{got}"
    elif spec.kind == "choice":
        message = f"must be one of {valid}{got}"
    elif spec.kind in _INT_KINDS and name == "context_length":
        message = (f"must be {valid}{got} (a main model window under {MINIMUM_CONTEXT_LENGTH:,} tokens is refused; "
                   f"leave it empty to use the model's own window)")
    elif spec.kind in _INT_KINDS:
        message = f"must be a whole number {valid}{got}"
    elif spec.kind == "float":
        message = f"must be a number {valid}{got}"
    else:
        message = f"must be {valid}{got}"
    return ConfigValueError(name, message, group=group)


def validate_value(group: str, name: str, value: Any) -> Any:
    """The typed value of one setting, or ``ConfigValueError`` naming its valid range."""
    spec = field_spec(group, name)
    try:
        typed = coerce(spec.kind, value)
    except (TypeError, ValueError, OverflowError):
        raise _invalid(group, name, spec, value) from None
    if spec.kind == "choice":
        ok = typed in spec.options()
    elif typed is None:
        ok = spec.kind == "optional_int"
    else:
        ok = spec.check(typed)
    if not ok:
        raise _invalid(group, name, spec, value)
    if spec.kind in _INT_KINDS and typed is not None and not STORABLE_INT_MIN <= typed <= STORABLE_INT_MAX:
        raise _invalid(group, name, spec, value, beyond_storage=True)
    return typed


def build_group(group: str, values: Mapping[str, Any] | None = None, *, base: Any = None) -> Any:
    """The frozen config of ``group``: ``base`` (default: the defaults) with ``values`` applied.

    Every given value is validated; all invalid ones are reported together through ``.all`` of the
    raised ``ConfigValueError``. An unknown field is an error too.
    """
    cls = group_class(group)
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
    raise_all(errors)
    return replace(current, **typed)


def build_compression(values: Mapping[str, Any] | None = None, **kw: Any) -> CompressionConfig:
    config: CompressionConfig = build_group("compression", {**(values or {}), **kw})
    return config


def build_auxiliary(values: Mapping[str, Any] | None = None, **kw: Any) -> AuxiliaryConfig:
    config: AuxiliaryConfig = build_group("auxiliary", {**(values or {}), **kw})
    return config


def build_caching(values: Mapping[str, Any] | None = None, **kw: Any) -> CachingConfig:
    config: CachingConfig = build_group("caching", {**(values or {}), **kw})
    return config


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
            group_class(group)
            built[group] = build_group(group, values, base=getattr(base, group))
        except ConfigValueError as exc:
            errors.extend(exc.all)
    raise_all(errors)
    return replace(base, **built)


def check_main_window(context_length: int) -> int:
    """Refuse a main model whose window is under 64,000 tokens (SPEC §4); return it otherwise.

    For the resolved window (the override or the model's own, e.g. from the model catalogue);
    ``str()`` of the error starts with ``model.context_length``.
    """
    if context_length < MINIMUM_CONTEXT_LENGTH:
        raise ConfigValueError(
            "context_length",
            f"the main model's context window is {context_length:,} tokens; at least "
            f"{MINIMUM_CONTEXT_LENGTH:,} is required. Choose a larger model or set "
            f"model.context_length to {MINIMUM_CONTEXT_LENGTH:,} or more",
            group="model",
        )
    return context_length
