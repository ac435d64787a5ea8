"""Read and write the runtime settings. The only code that touches the settings rows.

Guarantees:
- ``current()`` reads the database on every call (one query for all groups), so a saved change
  applies to the next turn or job without a restart; only the building of the config from an
  unchanged row is skipped.
- ``save_groups`` / ``save_group`` validate through ``compression.core.config`` before writing
  anything, write in one transaction, record one ``SettingsChange`` per changed field (secrets as
  "•••"), and after commit call the callbacks registered with ``on_settings_changed``.
- A row that somehow holds an invalid value (edited in the database by hand) does not break a turn:
  the field falls back to its default and the problem is logged.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from compression.core.config import (
    GROUPS,
    ConfigValueError,
    RuntimeConfig,
    build_group,
    build_runtime,
    config_values,
    group_fields,
    is_secret,
)
from compression.models import SETTINGS_MODELS, ModelPrice, SettingsChange
from llm.models import undated as undated_model_id

log = logging.getLogger(__name__)

MASK = SettingsChange.MASK


@dataclass(frozen=True)
class SettingsChanged:
    """What a callback receives: the changed fields per group (secrets masked) and the new config."""

    changes: dict[str, dict[str, tuple[str, str]]]
    config: RuntimeConfig
    user_id: int | None
    source: str

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(self.changes)


_callbacks: list[Callable[[SettingsChanged], Any]] = []


def on_settings_changed(callback: Callable[[SettingsChanged], Any]):
    """Register ``callback(SettingsChanged)``, called after a committed change. Usable as a decorator."""
    if callback not in _callbacks:
        _callbacks.append(callback)
    return callback


def disconnect_settings_changed(callback: Callable[[SettingsChanged], Any]) -> None:
    if callback in _callbacks:
        _callbacks.remove(callback)


def _notify(event: SettingsChanged) -> None:
    for callback in list(_callbacks):
        try:
            callback(event)
        except Exception:  # one broken listener must not hide the change from the others
            log.exception("settings-changed callback %r failed", callback)


# --- Reading ------------------------------------------------------------------------------------


# The settings statement of each database (alias, vendor), with the field of each column, built once;
# and the last row read on each database with the config built from it: an unchanged row (still read
# on every call) gives the same config without converting and validating its values again.
_statements: dict[tuple[str, str], tuple[str, list[tuple[str, str | None, Any]]]] = {}
_last: dict[str, tuple[tuple, RuntimeConfig]] = {}


def _statement(connection) -> tuple[str, list[tuple[str, str | None, Any]]]:
    """The one SELECT for every group (each group is a singleton row of its own table, LEFT JOINed
    onto one seed row), and its columns as (group, field name or None for the row's pk, field)."""
    key = (connection.alias, connection.vendor)
    if key not in _statements:
        quote = connection.ops.quote_name
        selects: list[str] = []
        joins: list[str] = []
        columns: list[tuple[str, str | None, Any]] = []
        for i, group in enumerate(GROUPS):
            model = SETTINGS_MODELS[group]
            alias, pk = f"g{i}", model._meta.pk
            joins.append(f"LEFT JOIN {quote(model._meta.db_table)} {alias} ON {alias}.{quote(pk.column)} = %s")
            selects.append(f"{alias}.{quote(pk.column)}")
            columns.append((group, None, pk))
            for name in group_fields(group):
                field = model._meta.get_field(name)
                selects.append(f"{alias}.{quote(field.column)}")
                columns.append((group, name, field))
        _statements[key] = (f"SELECT {', '.join(selects)} FROM (SELECT 1 AS seed) seed {' '.join(joins)}", columns)
    return _statements[key]


def current() -> RuntimeConfig:
    """The settings as stored right now (defaults for a group whose row does not exist yet): one
    query for every group, on every call, so pages that show several panels stay cheap and a
    change made anywhere (the admin, another process, the database by hand) applies at once."""
    from django.db import connection

    sql, columns = _statement(connection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [SETTINGS_MODELS[g].SINGLETON_PK for g in GROUPS])
        raw = tuple(cursor.fetchone())
    # The secrets' columns hold ciphertext: the same row opened with other keys is another config.
    stamp = (raw, settings.SECRET_KEY, tuple(getattr(settings, "SECRET_KEY_FALLBACKS", ())))
    last = _last.get(connection.alias)
    if last is not None and last[0] == stamp:
        return last[1]
    rows: dict[str, dict[str, Any] | None] = {}
    for (group, field_name, field), value in zip(columns, raw):
        if field_name is None:
            rows[group] = None if value is None else {}
        elif (row := rows[group]) is not None:
            row[field_name] = _from_db(field, value, connection)
    config = RuntimeConfig(**{g: build_group(g) if (row := rows[g]) is None else _tolerant(g, row) for g in GROUPS})
    _last[connection.alias] = (stamp, config)
    return config


def _from_db(field, value, connection):
    """A raw column value as the ORM would hand it over (booleans on SQLite, encrypted fields)."""
    for converter in connection.ops.get_db_converters(field.cached_col) + field.get_db_converters(connection):
        value = converter(value, field.cached_col, connection)
    return value


# --- Writing ------------------------------------------------------------------------------------


def save_group(group: str, values: Mapping[str, Any], *, user=None, source: str = "admin"):
    """Validate and store ``values`` (a subset of the group's fields); return the group's new config.

    Raises ``ConfigValueError`` (nothing saved) if any value is invalid.
    """
    return getattr(save_groups({group: values}, user=user, source=source), group)


def save_groups(groups: Mapping[str, Mapping[str, Any]], *, user=None, source: str = "admin") -> RuntimeConfig:
    """Validate every group first, then write them all in one transaction; return the new config."""
    with transaction.atomic():
        rows = {group: SETTINGS_MODELS[group].objects.select_for_update().get_or_create(
                    pk=SETTINGS_MODELS[group].SINGLETON_PK)[0]
                for group in groups if group in SETTINGS_MODELS}
        stored = RuntimeConfig(**{g: _tolerant(g, row.values()) for g, row in rows.items()})
        new = build_runtime(groups, base=stored)  # raises before anything is written
        changes: dict[str, dict[str, tuple[str, str]]] = {}
        audit: list[SettingsChange] = []
        user_id = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
        for group, row in rows.items():
            before, after = row.values(), config_values(getattr(new, group))
            changed = [name for name in after if after[name] != before[name]]
            if not changed:
                continue
            for name in changed:
                setattr(row, name, after[name])
                old, new_text = display_value(group, name, before[name]), display_value(group, name, after[name])
                changes.setdefault(group, {})[name] = (old, new_text)
                audit.append(_audit_row(user, source, group, name, old, new_text))
            row.save(update_fields=changed)
        SettingsChange.objects.bulk_create(audit)
        config = current()
        if changes:
            event = SettingsChanged(changes=changes, config=config, user_id=user_id, source=source)
            transaction.on_commit(lambda: _notify(event))
    return config


def _tolerant(group: str, row_values: dict[str, Any]):
    """The stored config of a group, ignoring stored values that no longer validate."""
    try:
        return build_group(group, row_values)
    except ConfigValueError as exc:
        for e in exc.all:
            log.error("stored setting %s is invalid (%s); using the default", e.key, e.message)
        bad = {e.field for e in exc.all}
        return build_group(group, {k: v for k, v in row_values.items() if k not in bad})


def display_value(group: str, name: str, value: Any) -> str:
    """How the audit trail shows a value: YAML-like text, secrets as "•••" (empty stays empty)."""
    if is_secret(group, name):
        return MASK if value else ""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- Prices -------------------------------------------------------------------------------------

def price_for(model: str) -> dict[str, float] | None:
    """USD per million tokens for ``model`` (input, output, cache_write_5m, cache_write_1h, cache_read).

    A dated id (``claude-sonnet-4-5-20250929``) falls back to its undated name; an unknown model
    gives None.
    """
    names = [model]
    undated = undated_model_id(model)
    if undated != model:
        names.append(undated)
    rows = {p.model: p for p in ModelPrice.objects.filter(model__in=names)}
    for name in names:
        if name in rows:
            return rows[name].as_dict()
    return None


def save_price(price: ModelPrice, *, user=None, source: str = "admin") -> ModelPrice:
    """Save a (validated) price row and audit each changed price as ``prices / <model>.<field>``."""
    with transaction.atomic():
        old = ModelPrice.objects.select_for_update().filter(pk=price.pk).first() if price.pk else None
        price.save()
        audit = []
        for name in ModelPrice.PRICE_FIELDS:
            before = "" if old is None else _price_text(getattr(old, name))
            after = _price_text(getattr(price, name))
            if old is None or old.model != price.model or getattr(old, name) != getattr(price, name):
                audit.append(_audit_row(user, source, "prices", f"{price.model}.{name}", before, after))
        SettingsChange.objects.bulk_create(audit)
    return price


def delete_price(price: ModelPrice, *, user=None, source: str = "admin") -> None:
    with transaction.atomic():
        SettingsChange.objects.bulk_create(
            _audit_row(user, source, "prices", f"{price.model}.{name}", _price_text(getattr(price, name)), "")
            for name in ModelPrice.PRICE_FIELDS)
        price.delete()


def _price_text(value) -> str:
    return format(Decimal(str(value)).normalize(), "f")


def _audit_row(user, source: str, group: str, name: str, old: str, new: str) -> SettingsChange:
    username = user.get_username() if user is not None and hasattr(user, "get_username") else ""
    user_id = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    return SettingsChange(user_id=user_id, username=username, source=source, group=group, field=name,
                          old_value=old, new_value=new)


__all__ = [
    "SettingsChanged",
    "current",
    "delete_price",
    "disconnect_settings_changed",
    "display_value",
    "on_settings_changed",
    "price_for",
    "save_group",
    "save_groups",
    "save_price",
]
