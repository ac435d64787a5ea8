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
import json
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
import urllib.error
from pathlib import Path

from bench.fanout.environment import bench_env, manage
from bench.soak_parts import TURN_TIMEOUT, Counters, Http, Sample, Sockets, rss_kb, say
from bench.soak_plan import MCP_INCLUDE, MCP_SERVER, STEPS, USERS, is_refusal, seed_plan, turn_text
from bench.soak_stats import report_lines, sample_header, sample_row
from bench.soak_trace import BASELINE, INTERVAL, OUT, top_lines
from tests.stack import Stack, free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
PROCESSES = ("worker", "web", "redis", "simulator")
REFUSAL_PAUSE = 10.0
THINK = 2.0
COMPRESSED_RE = re.compile(r'^hermes_compressions_total\{status="compressed",[^}]*\} ([0-9.e+]+)$', re.M)


def shell(env: dict, code: str, tag: str, timeout: float = 180) -> dict:
    """Run ``code`` in ``manage.py shell`` and return the JSON it printed after ``tag``."""
    out = manage(env, "shell", "-c", code, timeout=timeout)
    for line in out.splitlines():
        if line.startswith(tag + " "):
            return json.loads(line[len(tag) + 1:])
    raise RuntimeError(f"manage.py shell printed no {tag} line:\n{out[-2000:]}")


def compactions(http: Http, token: str) -> int | None:
    try:
        text = http.get("/metrics", {"Authorization": f"Bearer {token}"})
    except (urllib.error.URLError, OSError):
        return None
    return int(sum(float(v) for v in COMPRESSED_RE.findall(text)))


async def drive(c: dict, user: dict, http: Http, sockets: Sockets, deadline: float, counters: Counters,
                think: float, words: int) -> None:
    """One conversation: the plan's turns in order, cycle after cycle, until the time is up."""
    signals = sockets.finished[c["id"]]
    step, cycle = 0, 0
    while time.monotonic() < deadline:
        name = STEPS[step]
        text = turn_text(name, conversation=c["index"], cycle=cycle, ref=sockets.best_ref.get(c["id"]), words=words)
        if text is None:
            step, cycle = (step + 1) % len(STEPS), cycle + (step + 1 == len(STEPS))
            continue
        while not signals.empty():
            signals.get_nowait()
        started = time.monotonic()
        try:
            status, body = await asyncio.to_thread(http.send_answer, user["cookie"], c["id"], text)
        except (urllib.error.URLError, OSError) as exc:
            counters.post_errors += 1
            counters.errors.append(f"conversation {c['index']} {name}: POST {exc!r}")
            await asyncio.sleep(1)
            continue
        if is_refusal(status, body):
            counters.refused += 1
            counters.refused_by_user[user["name"]] = counters.refused_by_user.get(user["name"], 0) + 1
            await asyncio.sleep(REFUSAL_PAUSE)
            continue  # the same turn again, as a user would send it again
        step, cycle = (step + 1) % len(STEPS), cycle + (step + 1 == len(STEPS))
        if status >= 300:
            counters.post_errors += 1
            counters.errors.append(f"conversation {c['index']} {name}: HTTP {status} {body[:200]!r}")
            await asyncio.sleep(1)
            continue
        try:
            async with asyncio.timeout(TURN_TIMEOUT):
                outcome = await signals.get()
        except TimeoutError:
            counters.timeouts += 1
            counters.errors.append(f"conversation {c['index']} {name}: no end within {TURN_TIMEOUT:.0f} s")
            continue
        counters.turn_seconds.append(time.monotonic() - started)
        counters.steps[name] = counters.steps.get(name, 0) + 1
        if outcome == "done":
            counters.done += 1
        else:
            counters.failed += 1
            counters.errors.append(f"conversation {c['index']} {name}: the turn failed")
        await asyncio.sleep(think)


async def soak(*, web_port: int, seeded: dict, pids: dict[str, int], minutes: float, sockets_count: int,
               sample: float, think: float, words: int, token: str, log=say) -> dict:
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

    async def take() -> None:
        s = Sample(time.monotonic() - start, counters.done + counters.failed,
                   {name: rss_kb(pid) for name, pid in pids.items()},
                   await asyncio.to_thread(compactions, http, token))
        samples.append(s)
        log(sample_row(s, counters.refused, PROCESSES))

    log(sample_header(PROCESSES))
    await take()
    drivers = [asyncio.create_task(drive(c, users[c["user"]], http, sockets, deadline, counters, think, words))
               for c in seeded["conversations"]]
    next_sample = start + sample
    while time.monotonic() < deadline:
        await asyncio.sleep(max(0.0, min(next_sample, deadline) - time.monotonic()))
        if time.monotonic() >= next_sample - 0.01:
            await take()
            next_sample += sample
    await asyncio.wait(drivers, timeout=TURN_TIMEOUT)  # the turns in flight finish
    for task in drivers:
        task.cancel()
    await asyncio.gather(*drivers, return_exceptions=True)
    await take()
    await sockets.close()
    return {"samples": samples, "counters": counters, "messages": sockets.messages}


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


def run(*, minutes: float, sockets: int, conversations: int, sample: float, words: int, concurrency: int,
        think: float = THINK, debug: bool = False, keep: bool = False, tracemalloc: bool = False, log=say) -> dict:
    """Start the stack, seed the profile, soak, print the figures; return them. Every process is
    stopped."""
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="hermes-soak-tools-"))
    log_dir = base / "logs"
    log_dir.mkdir()
    env = bench_env(base / "data", free_port())
    env["DEBUG"] = "1" if debug else "0"
    token = secrets.token_urlsafe(24)
    env["HERMES_METRICS_TOKEN"] = token
    stack = Stack(env=env, log_dir=log_dir)
    failed = True
    try:
        manage(env, "migrate", "--noinput")
        plan = seed_plan(conversations, min(USERS, conversations))
        seeded = shell(env, f"import json; from bench.soak_seed import seed; seed(json.loads({json.dumps(plan)!r}))",
                       "SOAK-SEED")
        stack.start_redis()
        stack.start_simulator()
        worker_args = ["--include", "bench.soak_trace"] if tracemalloc else []
        stack.start_worker(concurrency=concurrency, extra_env=trace_env("worker", minutes) if tracemalloc else None,
                           extra_args=worker_args)
        web_port = start_web(stack, tracemalloc, trace_env("web", minutes) if tracemalloc else {})
        mcp = shell(env, "from bench.soak_seed import wait_mcp; wait_mcp()", "SOAK-MCP")
        pids = {name: stack.procs[name].pid for name in PROCESSES}
        limited = ", ".join(f"{u['name']} {u['limits']}" for u in seeded["users"] if u["limits"])
        log(f"stack up in {time.perf_counter() - started:.1f} s: profile tools, {sockets} sockets on {conversations} "
            f"conversations ({plan['model']}, context engine {plan['engine']}), {len(seeded['users'])} users "
            f"(limited: {limited}), MCP server {MCP_SERVER} connected ({len(mcp['tools'])} tools, offered: {', '.join(MCP_INCLUDE)}), {minutes:g} min, a sample every {sample:g} s, "
            f"think {think:g} s; 1 worker (threads x{concurrency}); DEBUG={env['DEBUG']}"
            f"{'; tracemalloc on (RSS figures include its own overhead)' if tracemalloc else ''}; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        result = asyncio.run(soak(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes,
                                  sockets_count=sockets, sample=sample, think=think, words=words, token=token,
                                  log=log))
        result["counts"] = shell(env, "from bench.soak_seed import counts; counts()", "SOAK-COUNTS")
        log("")
        for line in report_lines(counters=result["counters"], samples=result["samples"], counts=result["counts"],
                                 messages=result["messages"]):
            log(line)
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
