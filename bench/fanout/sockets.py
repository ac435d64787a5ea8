"""The live fan-out benchmark's sockets: N open websockets recording when each bench event
arrives, and the two ways a pass publishes to them (rounds of events, the worker stream)."""
from __future__ import annotations

import asyncio
import html
import re
import time
import urllib.request

import websockets

from bench.fanout.publisher import Publisher
from bench.fanout.rows import Row

CONNECT_PARALLEL = 8  # the consumer's DB work runs on one thread; Daphne gives up a handshake after 5 s
# lfb-<run>-<size>-<round>-<socket index>; the worker stream appends @<publish time.time()>.
ID_RE = re.compile(r"lfb-[a-z0-9]+-\d+-\d+-\d+")
STAMP_RE = re.compile(r"@(\d+\.\d+)")
WS_CONNECT_RE = re.compile(r'ws-connect="([^"]+)"')
PAGES_PARALLEL = 4


def served_socket_path(origin: str, conversation_id: str, cookie: str) -> str:
    """The socket URL the conversation's page is served with: it names the live state the page
    shows (``?live=``), so the connect sends the panels only if they changed since."""
    request = urllib.request.Request(f"{origin}/conversations/{conversation_id}/",
                                     headers={"Cookie": f"sessionid={cookie}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read().decode()
    found = WS_CONNECT_RE.search(body)
    if found is None:
        raise RuntimeError(f"the page of conversation {conversation_id} has no socket")
    return html.unescape(found.group(1))


async def served_socket_paths(origin: str, pages: list[tuple[str, str]], parallel: int = PAGES_PARALLEL) -> dict[str, str]:
    """{conversation id: `served_socket_path`} for (conversation id, cookie) pairs, a few at a time."""
    gate = asyncio.Semaphore(parallel)

    async def one(conversation_id: str, cookie: str) -> tuple[str, str]:
        async with gate:
            return conversation_id, await asyncio.to_thread(served_socket_path, origin, conversation_id, cookie)

    return dict(await asyncio.gather(*(one(*page) for page in pages)))


class Watchers:
    """N open sockets; one reader task each records when every bench id arrives."""

    def __init__(self) -> None:
        self.sockets: list = []
        self.readers: list[asyncio.Task] = []
        self.keys: list[str] = []  # conversation id or floor key, one a socket
        self.arrivals: dict[str, float] = {}  # perf_counter
        self.arrivals_wall: dict[str, float] = {}  # time.time(), against the worker stream's stamps
        self.stamps: dict[str, float] = {}  # event id -> publish time.time() carried in the event
        self.outstanding: set[str] = set()
        self.all_in = asyncio.Event()
        self.foreign = 0  # an event for another socket's conversation: isolation broken
        self.unexpected = 0  # anything else after the initial message
        self.connect_s: list[float] = []  # handshake start -> initial message
        self.full_states = 0  # initial messages that carried the live panels (not "in step")
        self.server_closed: list[int | None] = []  # close codes of sockets the server dropped
        self.closing = False
        self.dead: set[int] = set()  # sockets gone: their events cannot arrive, don't wait for them

    async def open(self, urls: list[tuple[str, str, dict]], parallel: int = CONNECT_PARALLEL) -> None:
        gate = asyncio.Semaphore(parallel)

        async def one(key: str, url: str, headers: dict):
            async with gate:
                start = time.perf_counter()
                ws = await websockets.connect(url, additional_headers=headers, open_timeout=30,
                                              max_size=2**22, compression=None)
                first = await asyncio.wait_for(ws.recv(), 30)  # the initial live state (or "ready")
                self.connect_s.append(time.perf_counter() - start)
                if isinstance(first, str) and 'id="gauge"' in first:
                    self.full_states += 1
                return key, ws, first

        results = await asyncio.gather(*(one(*u) for u in urls), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        for r in results:
            if not isinstance(r, BaseException):
                key, ws, first = r
                self.sockets.append(ws)
                self.keys.append(key)
                self.readers.append(asyncio.create_task(self._read(len(self.sockets) - 1, ws)))
        if failures:
            raise RuntimeError(f"{len(failures)} of {len(urls)} sockets failed to connect: {failures[0]!r}")

    async def _read(self, index: int, ws) -> None:
        mine = str(index)
        try:
            async for message in ws:
                now, wall = time.perf_counter(), time.time()
                match = ID_RE.search(message) if isinstance(message, str) else None
                if match is None:
                    self.unexpected += 1
                    continue
                event_id = match.group(0)
                if event_id.rsplit("-", 1)[1] != mine:
                    self.foreign += 1
                    continue
                if event_id not in self.arrivals:
                    self.arrivals[event_id], self.arrivals_wall[event_id] = now, wall
                    stamp = STAMP_RE.search(message, match.end())
                    if stamp is not None:
                        self.stamps[event_id] = float(stamp.group(1))
                self.outstanding.discard(event_id)
                if not self.outstanding:
                    self.all_in.set()
        except websockets.ConnectionClosed:
            pass
        self.dead.add(index)
        gone = {event_id for event_id in self.outstanding if event_id.rsplit("-", 1)[1] == mine}
        if gone:
            self.outstanding -= gone
            if not self.outstanding:
                self.all_in.set()
        if not self.closing:
            self.server_closed.append(ws.close_code)

    def expect(self, ids: list[str]) -> None:
        """Event ids to wait for; each ends with the index of its socket."""
        self.outstanding = {event_id for event_id in ids if int(event_id.rsplit("-", 1)[1]) not in self.dead}
        self.all_in.clear()
        if not self.outstanding:
            self.all_in.set()

    async def wait(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.all_in.wait(), timeout)
        except TimeoutError:
            pass

    async def close(self) -> None:
        self.closing = True
        await asyncio.gather(*(ws.close() for ws in self.sockets), return_exceptions=True)
        for task in self.readers:
            task.cancel()
        await asyncio.gather(*self.readers, return_exceptions=True)
        self.sockets.clear()
        self.readers.clear()


async def run_rounds(row: Row, watchers: Watchers, publish, rounds: int, timeout: float, pause: float,
                     slug: str) -> None:
    """publish(items: list[(socket index, event id)]) -> {event id: sent perf_counter}."""
    n = len(watchers.sockets)
    for r in range(rounds):
        ids = [f"lfb-{slug}-{n}-{r}-{i}" for i in range(n)]
        watchers.expect(ids)
        sent = await publish(list(enumerate(ids)))
        # The timeout runs from the last publish of the round.
        last = max(sent.values())
        await watchers.wait(max(0.0, last + timeout - time.perf_counter()))
        for event_id in ids:
            row.sent += 1
            arrived = watchers.arrivals.get(event_id)
            if arrived is not None and arrived - sent[event_id] <= timeout:
                row.latencies_ms.append((arrived - sent[event_id]) * 1000)
            elif arrived is not None:
                row.late += 1
        await asyncio.sleep(pause)


async def run_stream(row: Row, watchers: Watchers, publisher: Publisher, conversation_ids: list[str],
                     events: int, interval: float, timeout: float, pause: float, slug: str) -> dict | None:
    """One worker task streams `events` deltas to each conversation; latency = arrival time.time()
    minus the publish time.time() the delta carries. Returns the task's report."""
    n = len(watchers.sockets)
    run_id = f"{slug}-{n}"
    ids = [f"lfb-{run_id}-{r}-{i}" for r in range(events) for i in range(n)]
    watchers.expect(ids)
    report = None
    try:
        report = await publisher.stream(conversation_ids, events, interval, run_id,
                                        wait=30 + events * (interval + n * 0.02))
    except Exception as exc:  # the task failed or timed out: what arrived is still counted
        row.error = repr(exc)
    # The timeout runs from the task's last publish.
    last = report["finished"] if report else time.time()
    await watchers.wait(max(0.0, last + timeout - time.time()))
    for event_id in ids:
        row.sent += 1
        arrived, stamp = watchers.arrivals_wall.get(event_id), watchers.stamps.get(event_id)
        if arrived is None or stamp is None:
            continue
        if arrived - stamp <= timeout:
            row.latencies_ms.append((arrived - stamp) * 1000)
        else:
            row.late += 1
    row.worker = report
    await asyncio.sleep(pause)
    return report
