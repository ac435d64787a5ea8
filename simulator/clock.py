"""The simulator's clock, injectable so cache TTLs can be tested without waiting.

`SimClock()` follows wall time plus an offset that tests and benchmarks move forward over HTTP
(`POST /_sim/clock`) to replay a user's pause of more than 5 minutes instantly.
`SimClock(start=0.0)` is a manual clock: time stands still until advanced.
"""

from __future__ import annotations

import threading
import time


class SimClock:
    def __init__(self, start: float | None = None):
        self._manual = start is not None
        self._base = float(start) if start is not None else 0.0
        self._offset = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            if self._manual:
                return self._base + self._offset
            return time.time() + self._offset

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._offset += seconds
        return self.now()

    def set(self, t: float) -> float:
        with self._lock:
            current = (self._base if self._manual else time.time()) + self._offset
            if t < current:
                raise ValueError("the clock only moves forward")
            self._offset += t - current
        return self.now()

    def reset(self) -> None:
        with self._lock:
            self._offset = 0.0

    def snapshot(self) -> dict:
        return {"now": self.now(), "offset": self._offset, "manual": self._manual}
