"""The parts both soak profiles use (bench/soak.py, bench/soak_tools.py): printing at once, a
process's RSS, the counters, the product's form endpoint over HTTP, the websockets that tell
a driver its turn finished, a driver's send and wait, and the run of the drivers with its samples."""
from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import websockets

from bench.common_cli import cancel_tasks, close_sockets

TURN_TIMEOUT = 180.0
FINISHED_RE = re.compile(r'id="turn-status"[^>]*data-status="(done|failed)"')
# The simulator's report of a context_search result names the best message: `best (m12): "…"`.
BEST_REF_RE = re.compile(r"best \((m\d+)\)")


def say(line: str) -> None:
    """Print at once: a long run's samples show as they are taken, also into a file."""
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


def fmt_mb(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.1f}"


@dataclass
class Sample:
    elapsed: float
    turns: int
    rss_kb: dict[str, int | None]
    compactions: int | None = None


@dataclass
class Counters:
    done: int = 0
    failed: int = 0
    timeouts: int = 0
    post_errors: int = 0
    refused: int = 0  # sends refused by a per-user limit (tools profile): expected, not failures
    refused_by_user: dict[str, int] = field(default_factory=dict)
    dropped_sockets: int = 0
    turn_seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)  # finished turns by plan step (tools profile)


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

    def _send_request(self, cookie: str, conversation_id: str, text: str) -> urllib.request.Request:
        token = self.login_csrf(cookie, conversation_id)
        body = urllib.parse.urlencode({"text": text}).encode()
        return urllib.request.Request(
            f"{self.base}/conversations/{conversation_id}/send", data=body, method="POST",
            headers={"Cookie": f"sessionid={cookie}; csrftoken={token}", "X-CSRFToken": token,
                     "HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"})

    def send(self, cookie: str, conversation_id: str, text: str) -> int:
        with self._open(self._send_request(cookie, conversation_id, text)) as response:
            return response.status

    def send_answer(self, cookie: str, conversation_id: str, text: str) -> tuple[int, str]:
        """The status and body of a send, an HTTP error status included (a refused message is a 422
        whose body says why); a connection failure still raises."""
        try:
            with self._open(self._send_request(cookie, conversation_id, text)) as response:
                return response.status, response.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def get(self, path: str, headers: dict[str, str]) -> str:
        with self._open(urllib.request.Request(f"{self.base}{path}", headers=headers)) as response:
            return response.read().decode(errors="replace")


class Sockets:
    """The open websockets; the first socket of each conversation tells its driver when a turn
    finished, and keeps the last message reference a context_search report named. Every socket
    reads everything it is sent (the fan-out is part of the load)."""

    def __init__(self) -> None:
        self.finished: dict[str, asyncio.Queue] = {}
        self.best_ref: dict[str, str] = {}
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
            watched = c["id"] if i < len(conversations) else None
            self.readers.append(asyncio.create_task(self._read(ws, watched, counters)))

    async def _read(self, ws, watched: str | None, counters: Counters) -> None:
        signals = self.finished[watched] if watched is not None else None
        try:
            async for message in ws:
                self.messages += 1
                if signals is not None and isinstance(message, str):
                    ref = BEST_REF_RE.search(message)
                    if ref:
                        self.best_ref[watched] = ref.group(1)
                    match = FINISHED_RE.search(message)
                    if match:
                        signals.put_nowait(match.group(1))
        except websockets.ConnectionClosed:
            pass
        if not self.closing:
            counters.dropped_sockets += 1

    async def close(self) -> None:
        self.closing = True
        await close_sockets(self.sockets, self.readers)


async def open_sockets(web_port: int, seeded: dict, count: int, counters: Counters) -> tuple[Http, Sockets]:
    """The form endpoint and ``count`` open websockets, with each session's CSRF cookie fetched
    (before the clock starts)."""
    http = Http(web_port)
    sockets = Sockets()
    await sockets.open(web_port, seeded, count, counters)
    users = seeded["users"]
    for c in seeded["conversations"]:
        await asyncio.to_thread(http.login_csrf, users[c["user"]]["cookie"], c["id"])
    return http, sockets


async def post(counters: Counters, label: str, send, *args):
    """``send(*args)`` in a thread; on a connection failure it is counted and logged as
    ``<label><the error>``, and None is returned after a second's pause."""
    try:
        return await asyncio.to_thread(send, *args)
    except (urllib.error.URLError, OSError) as exc:
        counters.post_errors += 1
        counters.errors.append(f"{label}{exc!r}")
        await asyncio.sleep(1)
        return None


async def turn_end(signals: asyncio.Queue, started: float, counters: Counters, label: str) -> str | None:
    """Wait for the turn posted at ``started`` (time.monotonic()) to finish; count it, done or
    failed, with its time, and return its status; None (a timeout, counted) when it never ends."""
    try:
        async with asyncio.timeout(TURN_TIMEOUT):
            status = await signals.get()
    except TimeoutError:
        counters.timeouts += 1
        counters.errors.append(f"{label}: no end within {TURN_TIMEOUT:.0f} s")
        return None
    counters.turn_seconds.append(time.monotonic() - started)
    if status == "done":
        counters.done += 1
    else:
        counters.failed += 1
    return status


def drain(signals: asyncio.Queue) -> None:
    """Drop the turn ends already reported (a late one would end the next turn's wait)."""
    while not signals.empty():
        signals.get_nowait()


async def soak_loop(*, web_port: int, seeded: dict, pids: dict[str, int], minutes: float, sockets_count: int,
                    sample: float, header: str, row, drive, compactions=None, log=say) -> dict:
    """Open the sockets, then run one driver a conversation for ``minutes``, sampling every
    process's RSS every ``sample`` seconds (and ``compactions(http)``, when given, in a thread):
    ``header`` is printed first, then ``row(samples, counters)`` after each sample. A driver is
    ``drive(index, conversation, user, http, sockets, deadline, counters)``. Once the time is up the
    turns in flight finish (``TURN_TIMEOUT`` at most) and a last sample counts them."""
    counters = Counters()
    http, sockets = await open_sockets(web_port, seeded, sockets_count, counters)
    users = seeded["users"]
    samples: list[Sample] = []
    start = time.monotonic()
    deadline = start + minutes * 60

    async def take() -> None:
        elapsed, turns = time.monotonic() - start, counters.done + counters.failed
        rss = {name: rss_kb(pid) for name, pid in pids.items()}
        compacted = await asyncio.to_thread(compactions, http) if compactions is not None else None
        samples.append(Sample(elapsed, turns, rss, compacted))
        log(row(samples, counters))

    log(header)
    await take()
    tasks = [asyncio.create_task(drive(i, c, users[c["user"]], http, sockets, deadline, counters))
             for i, c in enumerate(seeded["conversations"])]
    next_sample = start + sample
    while time.monotonic() < deadline:
        await asyncio.sleep(max(0.0, min(next_sample, deadline) - time.monotonic()))
        if time.monotonic() >= next_sample - 0.01:
            await take()
            next_sample += sample
    await asyncio.wait(tasks, timeout=TURN_TIMEOUT)
    await cancel_tasks(tasks)
    await take()
    await sockets.close()
    return {"samples": samples, "counters": counters, "messages": sockets.messages}
