"""The clock behind the decisions that depend on the prompt cache's age (when a model call was
made, how long a conversation was idle): wall time, unless a benchmark or a test injects the
clock the model server runs on (``simulator.SimClock.now``), so that both sides agree on what
"an hour later" is."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

_lock = threading.Lock()
_source: Callable[[], float] | None = None


def now() -> float:
    """Seconds since the epoch, on the injected clock if there is one."""
    source = _source
    return source() if source is not None else time.time()


def now_datetime() -> datetime:
    return datetime.fromtimestamp(now(), tz=UTC)


@contextmanager
def injected(source: Callable[[], float]) -> Iterator[None]:
    """Run the block on ``source`` (e.g. a SimClock's ``now``) instead of wall time."""
    global _source
    with _lock:
        previous, _source = _source, source
    try:
        yield
    finally:
        with _lock:
            _source = previous
