"""The simulator throughput benchmark's figures: one cell (a client kind, a mode and a number of
clients) holds each server's latencies, busy time and server CPU time, summed over its slices."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bench.stats import percentile

MODES = ("non-stream", "stream")
SERVERS = ("simulator", "floor")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    """One server's figures in one cell, summed over its slices."""

    latencies_ms: list[float] = field(default_factory=list)
    busy_s: float = 0.0
    server_cpu_s: float = 0.0
    errors: int = 0
    first_error: str | None = None

    @property
    def rps(self) -> float | None:
        return len(self.latencies_ms) / self.busy_s if self.busy_s and self.latencies_ms else None

    @property
    def p50(self) -> float | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float | None:
        return percentile(self.latencies_ms, 99)

    @property
    def cpu_ms(self) -> float | None:
        return self.server_cpu_s * 1000 / len(self.latencies_ms) if self.latencies_ms else None

    def as_dict(self) -> dict:
        return {"requests": len(self.latencies_ms), "rps": self.rps, "p50_ms": self.p50, "p99_ms": self.p99,
                "server_cpu_ms_per_request": self.cpu_ms, "errors": self.errors, "first_error": self.first_error}


@dataclass
class Cell:
    client: str  # "httpx" or "sdk"
    mode: str
    clients: int
    sides: dict[str, Side] = field(default_factory=lambda: {name: Side() for name in SERVERS})
    client_cpu_s: float = 0.0

    @property
    def added_p50(self) -> float | None:
        sim, floor = self.sides["simulator"].p50, self.sides["floor"].p50
        return None if sim is None or floor is None else sim - floor

    def as_dict(self) -> dict:
        total = sum(len(s.latencies_ms) for s in self.sides.values())
        return {"client": self.client, "mode": self.mode, "clients": self.clients, "added_p50_ms": self.added_p50,
                "client_cpu_ms_per_request": self.client_cpu_s * 1000 / total if total else None,
                **{name: side.as_dict() for name, side in self.sides.items()}}


@dataclass
class Server:
    name: str
    url: str
    pid: int


def turns(slices: int) -> list[str]:
    """simulator, floor, floor, simulator, ...: each server goes first in half of the rounds."""
    order = []
    for i in range(slices):
        order += list(SERVERS) if i % 2 == 0 else list(reversed(SERVERS))
    return order
