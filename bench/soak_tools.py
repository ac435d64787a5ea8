"""The soak's tools profile (bench/soak.py --profile tools): turns that look like real use.

The stack of the default profile (Redis, the simulator, one Celery worker with 4 threads, Daphne,
each a real process on a free loopback port, a throwaway data folder and SQLite file), set up as
bench/soak_plan.py says: the ``lcm`` context engine, an stdio MCP server (the SDK-built server of
the MCP integration tests, ``tests/integration/mcp_test_server.py``, tools ``echo`` and ``big``),
four users of whom two have a per-minute message limit, conversations on the 64K simulator model
with a long notes file in each workspace. Each conversation's driver sends the plan's turns in
order through the product's form endpoint and waits for the socket to report the turn finished,
pauses ``think`` seconds, and goes on until the time is up. A send refused by a limit (422, the
limit's reason) is counted as a refusal and retried after ``REFUSAL_PAUSE`` seconds.

Every ``sample`` seconds it prints the RSS of each process and the compactions so far (from
``/metrics``, with a bearer token of its own). The report (bench/soak_stats.py) gives turns,
failures, refusals, compactions, p50 and p95 turn time, tool calls by name (read back from the
database), and for the worker and Daphne the RSS slope over the second half by least squares with
a verdict line each.

``tracemalloc=True`` loads bench/soak_trace.py into the worker (``--include``) and Daphne (its
ASGI application wrapped) and writes their growth sites to ``artifacts/soak-tracemalloc-*.txt``.
"""
from __future__ import annotations

import asyncio
import functools
import json
import re
import secrets
import sys
import time
import urllib.error
from pathlib import Path

from bench.common_cli import log_total, machine_load, stack_run
from bench.fanout.environment import bench_env, manage
from bench.soak_parts import Counters, Http, Sockets, drain, post, say, soak_loop, turn_end
from bench.soak_plan import MCP_INCLUDE, MCP_SERVER, STEPS, USERS, is_refusal, seed_plan, turn_text
from bench.soak_stats import report_lines, sample_header, sample_row
from bench.soak_trace import BASELINE, INTERVAL, OUT, top_lines
from bench.stack_seed import shell_json
from tests.stack import Stack, free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
PROCESSES = ("worker", "web", "redis", "simulator")
REFUSAL_PAUSE = 10.0
THINK = 2.0
COMPRESSED_RE = re.compile(r'^hermes_compressions_total\{status="compressed",[^}]*\} ([0-9.e+]+)$', re.M)


def compactions(http: Http, token: str) -> int | None:
    try:
        text = http.get("/metrics", {"Authorization": f"Bearer {token}"})
    except (urllib.error.URLError, OSError):
        return None
    return int(sum(float(v) for v in COMPRESSED_RE.findall(text)))


async def drive(index: int, c: dict, user: dict, http: Http, sockets: Sockets, deadline: float, counters: Counters,
                *, think: float, words: int) -> None:
    """One conversation: the plan's turns in order, cycle after cycle, until the time is up."""
    signals = sockets.finished[c["id"]]
    step, cycle = 0, 0
    while time.monotonic() < deadline:
        name = STEPS[step]
        text = turn_text(name, conversation=c["index"], cycle=cycle, ref=sockets.best_ref.get(c["id"]), words=words)
        if text is None:
            step, cycle = (step + 1) % len(STEPS), cycle + (step + 1 == len(STEPS))
            continue
        drain(signals)
        started = time.monotonic()
        label = f"conversation {c['index']} {name}"
        answer = await post(counters, f"{label}: POST ", http.send_answer, user["cookie"], c["id"], text)
        if answer is None:
            continue
        status, body = answer
        if is_refusal(status, body):
            counters.refused += 1
            counters.refused_by_user[user["name"]] = counters.refused_by_user.get(user["name"], 0) + 1
            await asyncio.sleep(REFUSAL_PAUSE)
            continue  # the same turn again, as a user would send it again
        step, cycle = (step + 1) % len(STEPS), cycle + (step + 1 == len(STEPS))
        if status >= 300:
            counters.post_errors += 1
            counters.errors.append(f"{label}: HTTP {status} {body[:200]!r}")
            await asyncio.sleep(1)
            continue
        outcome = await turn_end(signals, started, counters, label)
        if outcome is None:
            continue
        counters.steps[name] = counters.steps.get(name, 0) + 1
        if outcome != "done":
            counters.errors.append(f"{label}: the turn failed")
        await asyncio.sleep(think)


async def soak(*, web_port: int, seeded: dict, pids: dict[str, int], minutes: float, sockets_count: int,
               sample: float, think: float, words: int, token: str, log=say) -> dict:
    return await soak_loop(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes, sockets_count=sockets_count,
                           sample=sample, header=sample_header(PROCESSES),
                           row=lambda samples, counters: sample_row(samples[-1], counters.refused, PROCESSES),
                           drive=functools.partial(drive, think=think, words=words),
                           compactions=functools.partial(compactions, token=token), log=log)


def start_web(stack: Stack, tracing: bool, extra_env: dict) -> int:
    """Daphne as the Procfile starts it; with tracing, its application wrapped by the bench."""
    if not tracing:
        return stack.start_web()
    port = free_port()
    proc = stack._spawn("web", [sys.executable, "-m", "hermes_web.procs", "web", "-b", "127.0.0.1", "-p", str(port),
                                "bench.soak_trace_web:application"], extra_env)
    wait_for_port(port, proc, timeout=120, what="web")  # tracing slows its start-up
    return port


def trace_env(process: str, minutes: float) -> dict:
    half = minutes * 60 / 2
    return {OUT: str(ARTIFACTS / f"soak-tracemalloc-{process}.txt"), BASELINE: f"{half:.0f}",
            INTERVAL: f"{max(30.0, min(300.0, half / 4)):.0f}", "SOAK_TRACEMALLOC_PROCESS": process}


def log_trace_reports(minutes: float, log=say) -> None:
    for process in ("worker", "web"):
        path = Path(trace_env(process, minutes)[OUT])
        log(f"tracemalloc, {process}: {path} (top growth sites by line since half-time):")
        for line in top_lines(path):
            log(f"  {line}")


def soak_env(base: Path, debug: bool) -> dict:
    """The processes' environment: data in ``base``/data, Redis on a free port, DEBUG as asked."""
    env = bench_env(base / "data", free_port())
    env["DEBUG"] = "1" if debug else "0"
    return env


def start_stack(stack: Stack, concurrency: int, tracemalloc: bool, minutes: float) -> tuple[int, dict[str, int]]:
    """Redis, the simulator, the worker and Daphne (with ``tracemalloc``, the worker and Daphne
    tracing); returns Daphne's port and the pid of each of ``PROCESSES``."""
    stack.start_redis()
    stack.start_simulator()
    stack.start_worker(concurrency=concurrency, extra_env=trace_env("worker", minutes) if tracemalloc else None,
                       extra_args=["--include", "bench.soak_trace"] if tracemalloc else None)
    web_port = start_web(stack, tracemalloc, trace_env("web", minutes) if tracemalloc else {})
    return web_port, {name: stack.procs[name].pid for name in PROCESSES}


def log_end(started: float, tracemalloc: bool, minutes: float, log=say) -> None:
    """The tracemalloc reports when asked, and the run's total time."""
    if tracemalloc:
        log_trace_reports(minutes, log)
    log_total(started, log)


def run(*, minutes: float, sockets: int, conversations: int, sample: float, words: int, concurrency: int,
        think: float = THINK, debug: bool = False, keep: bool = False, tracemalloc: bool = False, log=say) -> dict:
    """Start the stack, seed the profile, soak, print the figures; return them. Every process is
    stopped."""
    started = time.perf_counter()
    token = secrets.token_urlsafe(24)
    with stack_run("hermes-soak-tools-", lambda base: {**soak_env(base, debug), "HERMES_METRICS_TOKEN": token}, keep,
                   log) as stack:
        env = stack.env
        manage(env, "migrate", "--noinput")
        plan = seed_plan(conversations, min(USERS, conversations))
        seeded = shell_json(env, f"import json; from bench.soak_seed import seed; seed(json.loads({json.dumps(plan)!r}))",
                            "SOAK-SEED")
        web_port, pids = start_stack(stack, concurrency, tracemalloc, minutes)
        mcp = shell_json(env, "from bench.soak_seed import wait_mcp; wait_mcp()", "SOAK-MCP")
        limited = ", ".join(f"{u['name']} {u['limits']}" for u in seeded["users"] if u["limits"])
        log(f"stack up in {time.perf_counter() - started:.1f} s: profile tools, {sockets} sockets on {conversations} "
            f"conversations ({plan['model']}, context engine {plan['engine']}), {len(seeded['users'])} users "
            f"(limited: {limited}), MCP server {MCP_SERVER} connected ({len(mcp['tools'])} tools, offered: {', '.join(MCP_INCLUDE)}), {minutes:g} min, a sample every {sample:g} s, "
            f"think {think:g} s; 1 worker (threads x{concurrency}); DEBUG={env['DEBUG']}"
            f"{'; tracemalloc on (RSS figures include its own overhead)' if tracemalloc else ''}; "
            f"{machine_load()}")
        result = asyncio.run(soak(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes,
                                  sockets_count=sockets, sample=sample, think=think, words=words, token=token,
                                  log=log))
        result["counts"] = shell_json(env, "from bench.soak_seed import counts; counts()", "SOAK-COUNTS")
        log("")
        for line in report_lines(counters=result["counters"], samples=result["samples"], counts=result["counts"],
                                 messages=result["messages"]):
            log(line)
        log_end(started, tracemalloc, minutes, log)
        return result
