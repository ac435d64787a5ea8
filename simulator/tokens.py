"""The simulator's provider tokenizer: the product's cl100k_base count, remembered by text digest,
times a scale (1.0 by default) that stands for a provider whose tokenizer counts differently."""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Callable
from typing import Any


class MemoCounter:
    """Token counts remembered by text digest: a long conversation resends the same blocks on
    every turn, and hashing is far cheaper than tokenising them again."""

    def __init__(self, count: Callable[[str], int], max_entries: int = 200_000):
        self._count = count
        self._memo: dict[bytes, int] = {}
        self._max = max_entries
        self._lock = threading.Lock()

    def __call__(self, text: str) -> int:
        if len(text) < 64:
            return self._count(text)
        key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        n = self._count(text)
        with self._lock:
            if len(self._memo) >= self._max:
                self._memo.clear()
            self._memo[key] = n
        return n


TOKEN_SCALE_BOUNDS = (0.25, 4.0)


def parse_token_scale(value: Any) -> float:
    """``HERMES_SIM_TOKEN_SCALE`` or ``/_sim/tokens {"scale": x}``: a number within 0.25–4."""
    try:
        factor = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"token scale: not a number: {value!r}") from None
    if not TOKEN_SCALE_BOUNDS[0] <= factor <= TOKEN_SCALE_BOUNDS[1]:
        raise ValueError(f"token scale: {factor} is outside 0.25–4")
    return factor


class ScaledCounter:
    """The provider's tokenizer: ``scale`` times the product's cl100k_base count, rounded up (1.0,
    the default, is the product's count exactly). A real provider's tokenizer differs from the
    product's counter; this is what the product's measured real-to-counted ratio is tested on."""

    def __init__(self, count: Callable[[str], int], scale: float = 1.0):
        self._count = count
        self.default = self.scale = scale

    def __call__(self, text: str) -> int:
        n = self._count(text)
        return n if self.scale == 1.0 else math.ceil(n * self.scale)
