"""Fault injection: which failure a request should meet, per request or per server.

Per request: header `x-sim-fault: <name>[=<arg>]` (the SDK's `extra_headers`; it is resent on
every SDK retry, so the fault survives the retries and surfaces as the final error).
Per server: `HERMES_SIM_FAULT=<name>[=<arg>][:<count>]` at start-up, or
`POST /_sim/faults {"fault": "<name>[=<arg>]", "count": N}` — the next N requests fail
(no count: every request until cleared). Only `/v1/messages` and `/v1/chat/completions` requests
consume faults.

Names and args:
  overflow[=W]     400 "prompt is too long: N tokens > W maximum" (W defaults to the model window)
  overflow_turn[=W] the same for a chat request only: a compression prompt passes and leaves the
                   fault queued (so error recovery's compressions succeed while the turn overflows)
  413              413 request_too_large
  429[=ms]         429 rate_limit_error with `retry-after-ms: ms` (default: the server's setting)
  long_context     429 "Extra usage is required for long context requests."
  500              500 api_error
  529              529 overloaded_error
  401              401 authentication_error
  midstream        200, then an `event: error` (overloaded_error) after the first text delta
  slow[=s]         every SSE event delayed by s seconds (default 0.05)
  empty_summary    a compression prompt gets an empty answer (other requests are unaffected)
  no_usage         200 as usual, but the usage reports no prompt tokens
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

FAULT_NAMES = frozenset(
    {"overflow", "overflow_turn", "no_usage", "413", "429", "long_context", "500", "529", "401", "midstream", "slow",
     "empty_summary"}
)
FAULT_HEADER = "x-sim-fault"


@dataclass(frozen=True)
class Fault:
    name: str
    arg: str | None = None

    def number(self, default: float) -> float:
        try:
            return float(self.arg) if self.arg not in (None, "") else default
        except ValueError:
            return default

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name}={self.arg}"


def parse_fault(text: str | None) -> Fault | None:
    """`"429=20"` -> Fault("429", "20"); empty -> None; an unknown name raises ValueError."""
    text = (text or "").strip()
    if not text or text.lower() == "none":
        return None
    name, _, arg = text.partition("=")
    name = name.strip().lower()
    if name not in FAULT_NAMES:
        raise ValueError(f"unknown fault {name!r}; expected one of {', '.join(sorted(FAULT_NAMES))}")
    return Fault(name, arg.strip() or None)


def parse_fault_spec(text: str) -> tuple[Fault | None, int | None]:
    """`"529:3"` -> (Fault("529"), 3); `"529"` -> (Fault("529"), None = forever)."""
    spec, sep, count = (text or "").strip().rpartition(":")
    if not sep:
        return parse_fault(count), None
    return parse_fault(spec), int(count)


class FaultQueue:
    """Server-wide faults: consumed one per request, in order; a `None` count never runs out."""

    def __init__(self) -> None:
        self._items: list[list] = []  # [fault, remaining or None]
        self._lock = threading.Lock()

    def push(self, fault: Fault, count: int | None = None) -> None:
        if count is not None and count <= 0:
            return
        with self._lock:
            self._items.append([fault, count])

    def peek(self) -> Fault | None:
        """The fault the next request would take, without taking it."""
        with self._lock:
            for fault, remaining in self._items:
                if remaining is None or remaining > 0:
                    return fault
            return None

    def take(self) -> Fault | None:
        with self._lock:
            while self._items:
                fault, remaining = self._items[0]
                if remaining is None:
                    return fault
                if remaining > 0:
                    self._items[0][1] = remaining - 1
                    if remaining - 1 == 0:
                        self._items.pop(0)
                    return fault
                self._items.pop(0)
            return None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [{"fault": str(f), "remaining": n} for f, n in self._items]
