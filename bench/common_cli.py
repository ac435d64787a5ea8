"""What the stack benchmarks share around their measurements: running ``main`` as a script (SIGTERM
stops it as Ctrl-C does, every process it started is stopped on the way out, and it exits 0
regardless), a throwaway folder for the run kept or removed at the end (with the stack whose
processes log into it), the machine's load in the
first and last lines, and ending a set of asyncio tasks and websockets."""
from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tests.stack import Stack


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run_main(main: Callable[[], object]) -> None:
    """A benchmark's ``if __name__ == "__main__"``: run ``main()``; exits 0 even when interrupted."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped", file=sys.stderr)
    sys.exit(0)


def new_base(prefix: str) -> tuple[Path, Path]:
    """A throwaway folder for a run and the ``logs`` folder in it, for the processes' logs."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    log_dir = base / "logs"
    log_dir.mkdir()
    return base, log_dir


def machine_load() -> str:
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def log_total(started: float, log: Callable[[str], None]) -> None:
    """The run's last line: its time since ``started`` (time.perf_counter()) and the load then."""
    log(f"total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} at the end")


def keep_or_remove(base: Path, log_dir: Path, keep: bool, log: Callable[[str], None]) -> None:
    """At the end of a run: say where the logs are when they are kept, else remove ``base``."""
    if keep:
        log(f"logs kept in {log_dir}")
    else:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def stack_run(prefix: str, env_of: Callable[[Path], dict], keep: bool, log: Callable[[str], None]) -> Iterator[Stack]:
    """A stack whose processes run with ``env_of(folder)`` and log into ``logs`` in a throwaway
    folder; on the way out every process is stopped and the folder removed, unless ``keep`` or the
    run failed."""
    base, log_dir = new_base(prefix)
    stack = Stack(env=env_of(base), log_dir=log_dir)
    failed = True
    try:
        yield stack
        failed = False
    finally:
        stack.stop()
        keep_or_remove(base, log_dir, keep or failed, log)


async def cancel_tasks(tasks: Iterable[asyncio.Task]) -> None:
    """Cancel the tasks and wait until they have all ended."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def close_sockets(sockets: Iterable, readers: Iterable[asyncio.Task]) -> None:
    """Close the websockets (their close handshakes at once), then end the tasks reading them."""
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    await cancel_tasks(readers)
