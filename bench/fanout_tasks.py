"""A benchmark-only Celery task: active agent turns streaming deltas, as seen by the channel layer.

During a chat turn the agent task (``sessions.agent.loop._stream_once``) broadcasts each text
delta of the model's stream to the conversation's group from inside the running worker task, on
the process's long-lived publishing loop (``sessions.events.broadcast``). ``stream_events`` does
the same for many conversations at once: each round it renders one delta per conversation (the
product's ``_stream_delta.html`` fragment) and broadcasts them back to back, like that many
concurrent streams each emitting a delta, then sleeps ``interval`` (the product flushes deltas
every ``DELTA_FLUSH_SECONDS`` = 50 ms).

Each delta's text is ``lfb-<run_id>-<round>-<index>@<time.time()>``, the timestamp taken right
before its broadcast; ``bench/live_fanout.py`` compares its sockets' arrival ``time.time()``
against it (same machine, same clock).

Loaded only by the benchmark's worker: ``celery -A hermes_web worker --include bench.fanout_tasks``.
"""
from __future__ import annotations

import time

from celery import shared_task

STAMP = "__lfb_stamp__"  # replaced by the publish time right before each broadcast


def _percentile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


@shared_task(name="bench.fanout_tasks.stream_events")
def stream_events(conversation_ids: list[str], events: int, interval: float, run_id: str) -> dict:
    """Publish ``events`` rounds of one delta to each conversation; return what the worker saw."""
    from sessions import fragments
    from sessions.events import broadcast

    started = time.time()
    broadcast_ms: list[float] = []
    round_ms: list[float] = []
    published = 0
    for r in range(events):
        round_start = time.perf_counter()
        for i, conversation_id in enumerate(conversation_ids):
            # Rendered per event as the product does; only the stamp is filled in after rendering.
            html = fragments.render_stream_delta(f"stream-{i}-0", f"lfb-{run_id}-{r}-{i}@{STAMP}")
            before = time.perf_counter()
            html = html.replace(STAMP, f"{time.time():.6f}")
            broadcast(conversation_id, "delta", html)  # never raises; a failure shows as a missing event
            broadcast_ms.append((time.perf_counter() - before) * 1000)
            published += 1
        round_ms.append((time.perf_counter() - round_start) * 1000)
        if r < events - 1 and interval > 0:
            time.sleep(interval)
    broadcast_ms.sort()
    round_ms.sort()
    return {
        "published": published, "started": started, "finished": time.time(),
        "broadcast_ms": {"p50": _percentile(broadcast_ms, 50), "p99": _percentile(broadcast_ms, 99),
                         "max": broadcast_ms[-1] if broadcast_ms else None},
        "round_ms": {"p50": _percentile(round_ms, 50), "max": round_ms[-1] if round_ms else None},
    }
