"""The refusal of an import and the small typed readers the import's checks share: each reads one
field of the document and names its path (``messages[3].role``) when the value is wrong.

Strings are refused when they hold a NUL character or half of a surrogate pair: neither can be
stored (PostgreSQL refuses both in text and in JSON).
"""
from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Literal, overload

from django.utils import timezone
from django.utils.dateparse import parse_datetime

INT_MAX = 2_147_483_647  # the largest value an integer column holds on every backend
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_MISSING = object()


class ImportRefused(ValueError):
    """The document cannot be imported; nothing was written. ``path`` names the bad field
    (``messages[3].role``; ``document`` for the whole document), ``reason`` says what is wrong."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def join(path: str, key) -> str:
    """``path`` and a member: ``messages`` + 3 → ``messages[3]``, ``messages[3]`` + "role" → ``messages[3].role``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def type_name(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def obj(value, path: str) -> dict:
    if not isinstance(value, dict):
        raise ImportRefused(path, f"must be an object, not {type_name(value)}")
    return value


def array(value, path: str) -> list:
    if not isinstance(value, list):
        raise ImportRefused(path, f"must be a list, not {type_name(value)}")
    return value


def field(record: dict, key: str, path: str, default=_MISSING):
    """``record[key]``; refused when it is missing and no default is given."""
    if key in record:
        return record[key]
    if default is _MISSING:
        raise ImportRefused(join(path, key), "is missing")
    return default


def text(value, path: str, *, max_chars: int | None = None, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise ImportRefused(path, f"must be a string, not {type_name(value)}")
    if not empty and not value:
        raise ImportRefused(path, "must not be empty")
    if max_chars is not None and len(value) > max_chars:
        raise ImportRefused(path, f"is too long: {len(value):,} characters (at most {max_chars:,})")
    storable(value, path)
    return value


def storable(value: str, path: str) -> None:
    bad = _UNSTORABLE.search(value)
    if bad is not None:
        what = "a NUL character" if bad.group() == "\x00" else "half of a surrogate pair"
        raise ImportRefused(path, f"holds {what} at position {bad.start():,}, which cannot be stored")


def flag(value, path: str) -> bool:
    if not isinstance(value, bool):
        raise ImportRefused(path, f"must be true or false, not {type_name(value)}")
    return value


@overload
def integer(value, path: str, *, minimum: int = 0, maximum: int = INT_MAX, null: Literal[False] = False) -> int: ...
@overload
def integer(value, path: str, *, minimum: int = 0, maximum: int = INT_MAX, null: bool) -> int | None: ...


def integer(value, path: str, *, minimum: int = 0, maximum: int = INT_MAX, null: bool = False) -> int | None:
    """`value` as a whole number in [minimum, maximum]; None only where `null` allows it."""
    if value is None and null:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImportRefused(path, f"must be a whole number, not {type_name(value)}")
    if not minimum <= value <= maximum:
        raise ImportRefused(path, f"must be between {minimum:,} and {maximum:,} (it is {value:,})")
    return value


def number(value, path: str, *, null: bool = False) -> float | None:
    if value is None and null:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ImportRefused(path, f"must be a number, not {type_name(value)}")
    return float(value)


def moment(value, path: str, *, null: bool = True) -> datetime | None:
    """An ISO 8601 date and time (UTC when it names no offset)."""
    if value is None and null:
        return None
    parsed = None
    if isinstance(value, str) and len(value) <= 64:
        try:
            parsed = parse_datetime(value)
        except ValueError:
            parsed = None
    if parsed is None:
        raise ImportRefused(path, f"must be an ISO 8601 date and time, not {str(value)[:40]!r}")
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=UTC)


def money(value, path: str) -> Decimal:
    """A cost in USD: at least 0, below 1,000,000, six decimal places kept."""
    try:
        amount = Decimal(str(value)).quantize(Decimal("0.000001"))
    except (InvalidOperation, ValueError):
        raise ImportRefused(path, f"must be an amount in USD, not {str(value)[:40]!r}") from None
    if isinstance(value, bool) or not Decimal(0) <= amount < Decimal(1_000_000):
        raise ImportRefused(path, "must be an amount between 0 and 999,999.999999")
    return amount


def choice(value, path: str, allowed) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ImportRefused(path, f"must be one of {', '.join(allowed)}")
    return value
