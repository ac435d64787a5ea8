"""A benchmark-only Celery task: active agent turns streaming deltas, as seen by the channel layer.

During a chat turn the agent task (``sessions.agent.loop._stream_once``) pushes each text delta
of the model's stream to the conversation's group from inside the running worker task
(``sessions.live.stream_delta``); the process's pushes are sent in batches on its long-lived
publishing loop. ``stream_events`` does the same for many conversations at once: each round it
hands one delta per conversation to ``sessions.live.stream_deltas`` (the product's delta
fragment, one channel-layer batch), like that many concurrent streams each emitting a delta
within one flush interval, then sleeps ``interval`` (the product flushes deltas every
``DELTA_FLUSH_SECONDS`` = 50 ms). ``one_by_one=True`` pushes them one ``stream_delta`` at a time
instead (the path before batching, for comparison).

Each delta's text is ``lfb-<run_id>-<round>-<index>@<time.time()>``, the timestamp taken right
before its push (the round's push, when batched); ``bench/live_fanout.py`` compares its sockets'
arrival ``time.time()`` against it (same machine, same clock).

Loaded only by the benchmark's worker: ``celery -A hermes_web worker --include bench.fanout_tasks``.
"""
from __future__ import annotations

import time

from celery import shared_task


def _percentile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return ordered[rank - 1]


@shared_task(name="bench.fanout_tasks.stream_events")
def stream_events(conversation_ids: list[str], events: int, interval: float, run_id: str,
                  one_by_one: bool = False) -> dict:
    """Publish ``events`` rounds of one delta to each conversation; return what the worker saw
    (``broadcast_ms``: each push call, a round's batch or one delta)."""
    from sessions import live

    started = time.time()
    broadcast_ms: list[float] = []
    round_ms: list[float] = []
    published = 0
    for r in range(events):
        round_start = time.perf_counter()
        if one_by_one:
            for i, conversation_id in enumerate(conversation_ids):
                before = time.perf_counter()
                live.stream_delta(conversation_id, f"stream-{i}-0", f"lfb-{run_id}-{r}-{i}@{time.time():.6f}")
                broadcast_ms.append((time.perf_counter() - before) * 1000)
        else:
            before = time.perf_counter()
            stamp = f"{time.time():.6f}"
            live.stream_deltas([(conversation_id, f"stream-{i}-0", f"lfb-{run_id}-{r}-{i}@{stamp}")
                                for i, conversation_id in enumerate(conversation_ids)])
            broadcast_ms.append((time.perf_counter() - before) * 1000)
        published += len(conversation_ids)  # never raises; a failure shows as missing events
        round_ms.append((time.perf_counter() - round_start) * 1000)
        if r < events - 1 and interval > 0:
            time.sleep(interval)
    broadcast_ms.sort()
    round_ms.sort()
    return {
        "published": published, "calls": len(broadcast_ms), "started": started, "finished": time.time(),
        "broadcast_ms": {"p50": _percentile(broadcast_ms, 50), "p99": _percentile(broadcast_ms, 99),
                         "max": broadcast_ms[-1] if broadcast_ms else None},
        "round_ms": {"p50": _percentile(round_ms, 50), "max": round_ms[-1] if round_ms else None},
    }
