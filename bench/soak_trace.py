"""tracemalloc snapshots inside the soak's worker and web processes (bench/soak.py --tracemalloc),
without any change to the product.

- The worker loads this module with Celery's own ``--include bench.soak_trace`` (as the fan-out
  benchmark loads its task module); its ``worker_ready`` signal handler starts the snapshot thread.
- Daphne is given ``bench.soak_trace_web:application`` as its ASGI application: that module starts
  the thread and hands over ``hermes_web.asgi.application`` unchanged.

Neither is loaded unless the soak asks for it, and both do nothing unless ``SOAK_TRACEMALLOC_OUT``
names the report file. The thread starts tracing ``SOAK_TRACEMALLOC_BASELINE`` seconds after it
starts (the soak passes half the run: the second half's growth is the question) and takes the
baseline snapshot then, then one every ``SOAK_TRACEMALLOC_INTERVAL`` seconds, and after each
rewrites the report: the traced memory over time, and the largest growth since the baseline
grouped by line and by traceback. Tracing only from half-time on leaves the first half at full
speed (tracing every allocation with its traceback slows a busy process several times over) and
still sees all of the growth: what grew was allocated after the baseline and is still alive.
"""
from __future__ import annotations

import linecache
import os
import threading
import time
import tracemalloc
from pathlib import Path

from bench.soak_parts import rss_kb

OUT = "SOAK_TRACEMALLOC_OUT"
BASELINE = "SOAK_TRACEMALLOC_BASELINE"
INTERVAL = "SOAK_TRACEMALLOC_INTERVAL"
FRAMES = 10
TOP_LINES = 30
TOP_TRACEBACKS = 10
# The report's own allocations: tracemalloc's, and linecache's copies of the source lines it quotes.
IGNORED = (tracemalloc.__file__, linecache.__file__, "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
           "<unknown>", __file__)


def enabled() -> bool:
    return bool(os.environ.get(OUT))


def begin() -> None:
    if enabled() and not tracemalloc.is_tracing():
        tracemalloc.start(FRAMES)


def _filtered(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces([tracemalloc.Filter(False, pattern) for pattern in IGNORED])


def format_report(name: str, *, started: float, trend: list[tuple[float, float, float]],
                  diff_lines: list, diff_tracebacks: list) -> str:
    """The report's text: the traced memory and RSS per snapshot, then the growth sites."""
    out = [f"tracemalloc in the soak's {name} (pid {os.getpid()}), {FRAMES} frames a trace; "
           f"growth since the baseline snapshot",
           "", f"{'minute':>7}  {'traced MB':>9}  {'RSS MB':>8}"]
    out += [f"{(t - started) / 60:>7.1f}  {traced:>9.1f}  {rss:>8.1f}" for t, traced, rss in trend]
    out += ["", f"top {TOP_LINES} growth sites by line (size change, count change, then the line):"]
    for stat in diff_lines[:TOP_LINES]:
        frame = stat.traceback[0]
        out.append(f"{stat.size_diff / 1024:>+10.1f} KiB {stat.count_diff:>+8} blocks  {frame.filename}:{frame.lineno}")
    out += ["", f"top {TOP_TRACEBACKS} growth sites by traceback (innermost frame last):"]
    for stat in diff_tracebacks[:TOP_TRACEBACKS]:
        out.append(f"{stat.size_diff / 1024:>+10.1f} KiB {stat.count_diff:>+8} blocks "
                   f"(now {stat.size / 1024:.1f} KiB in {stat.count} blocks)")
        out += [f"    {line}" for line in stat.traceback.format(limit=FRAMES)]
    return "\n".join(out) + "\n"


def _loop(name: str, path: Path, baseline_after: float, interval: float) -> None:
    started = time.time()
    trend: list[tuple[float, float, float]] = []
    baseline: tracemalloc.Snapshot | None = None
    wait = baseline_after
    while True:
        time.sleep(wait)
        wait = interval
        begin()
        snapshot = _filtered(tracemalloc.take_snapshot())
        trend.append((time.time(), tracemalloc.get_traced_memory()[0] / 2**20, (rss_kb(os.getpid()) or 0) / 1024))
        if baseline is None:
            baseline = snapshot
            path.write_text(format_report(name, started=started, trend=trend, diff_lines=[], diff_tracebacks=[]))
            continue
        text = format_report(name, started=started, trend=trend,
                             diff_lines=snapshot.compare_to(baseline, "lineno"),
                             diff_tracebacks=snapshot.compare_to(baseline, "traceback"))
        path.write_text(text)
        del snapshot


def start_thread(name: str) -> None:
    """Start the snapshot thread (which starts tracing at the baseline), when the soak asked for it."""
    if not enabled():
        return
    path = Path(os.environ[OUT])
    path.parent.mkdir(parents=True, exist_ok=True)
    baseline_after = float(os.environ.get(BASELINE, "60"))
    interval = float(os.environ.get(INTERVAL, "60"))
    threading.Thread(target=_loop, args=(name, path, baseline_after, interval), daemon=True,
                     name="soak-tracemalloc").start()


def top_lines(path: Path, n: int = 12) -> list[str]:
    """The report's first ``n`` growth sites by line (for the soak's own output)."""
    if not path.exists():
        return [f"{path}: not written (the run ended before the baseline snapshot?)"]
    lines = path.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"top {TOP_LINES} growth sites by line")), None)
    if start is None:
        return [f"{path}: no growth sites yet"]
    return lines[start + 1:start + 1 + n]


def _connect_worker() -> None:
    from celery.signals import worker_ready

    @worker_ready.connect(weak=False)
    def _ready(**kwargs) -> None:
        start_thread("worker")


if enabled() and os.environ.get("SOAK_TRACEMALLOC_PROCESS") == "worker":
    _connect_worker()
