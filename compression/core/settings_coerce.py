"""Read loose setting input into a field's type: the text and values YAML and HTML forms produce.

``"0.5"`` → 0.5, ``"yes"``/``"on"`` → True, ``"20"``/``"2_000"`` → 20, an empty optional number →
None, and YAML 1.1's unquoted ``off`` (read as False) back to the word a choice field expects.
Nothing more: a value that cannot be read as the type raises ``ValueError`` and is never guessed at.
Pure standard library.
"""

from __future__ import annotations

import math
from typing import Any

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def coerce(kind: str, value: Any) -> Any:
    """Parse ``value`` into the type of a field of ``kind``; ``ValueError`` if it cannot be read as one."""
    if kind == "bool":
        return _bool(value)
    if kind in ("int", "optional_int"):
        if kind == "optional_int" and (value is None or (isinstance(value, str) and not value.strip())):
            return None
        return _int(value)
    if kind == "float":
        return _float(value)
    if kind == "choice" and isinstance(value, bool):
        return "on" if value else "off"  # YAML 1.1 reads an unquoted off/on as a boolean
    # str, choice, url
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError
    return value.strip() if kind in ("choice", "url") else value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        # int() refuses text of more than sys.get_int_max_str_digits() digits with a ValueError.
        return int(value.strip().replace("_", "").replace(",", ""))
    raise ValueError


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    number = float(value.strip()) if isinstance(value, str) else float(value)  # OverflowError: a huge int
    if not math.isfinite(number):
        raise ValueError
    return number
