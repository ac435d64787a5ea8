"""One row of the live fan-out table: a socket count on one publishing path, and its latencies."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from bench.stats import percentile

STREAM, PER_TASK, GROUP_SEND, FLOOR = PATHS = (
    "product: worker stream", "product: task per event", "product group_send", "floor group_send")


@dataclass
class Row:
    n: int
    path: str
    sent: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    late: int = 0
    repeat: bool = False  # the repeat pass of the largest size (Redis connection check)
    worker: dict | None = None  # the stream task's own report
    error: str | None = None
    cpu_ms: dict = field(default_factory=dict)  # process -> CPU milliseconds it spent during this row's rounds

    @property
    def delivered(self) -> float:
        return len(self.latencies_ms) / self.sent if self.sent else 0.0

    @property
    def p50(self) -> float | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float | None:
        return percentile(self.latencies_ms, 99)

    def as_dict(self) -> dict:
        return {"n": self.n, "path": self.path, "repeat": self.repeat, "sent": self.sent,
                "received": len(self.latencies_ms), "worker": self.worker, "error": self.error,
                "delivered": self.delivered, "p50_ms": self.p50, "p99_ms": self.p99,
                "mean_ms": statistics.fmean(self.latencies_ms) if self.latencies_ms else None, "late": self.late,
                "cpu_ms": self.cpu_ms}
