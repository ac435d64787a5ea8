"""The parts of ``bench/two_webs.py``: a throwaway PostgreSQL database, the product's send form
over HTTP, Redis's command counts, and the watching websockets, each of which learns which web
process holds it from Redis itself (the channel layer's group members name their process). The
users and conversations are seeded by bench/stack_seed.py."""
from __future__ import annotations

import asyncio
import hashlib
import re
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field

import websockets

from bench.common_cli import close_sockets

CONNECT_PARALLEL = 8  # at most one connect per conversation at a time (see Watchers.open)
ID_RE = re.compile(r"lfb-[a-z0-9]+-\d+-\d+-\d+")  # bench.fanout_tasks.stream_events' delta text
STAMP_RE = re.compile(r"@(\d+\.\d+)")
DELTA_RE = re.compile(r'-text" hx-swap-oob="beforeend"')  # sessions.fragments.render_stream_delta
DONE_RE = re.compile(r'id="turn-status"[^>]*data-status="(done|failed)"')
TITLE_RE = re.compile(r'hx-swap-oob="innerHTML:#conversation-title"')  # sessions.fragments.render_title_changed

class Database:
    """A database of its own on the server ``DATABASE_URL`` names (created, dropped at the end),
    so a run never touches that database's rows."""

    def __init__(self, url: str) -> None:
        self.parts = urllib.parse.urlsplit(url)
        self.name = f"hermes_two_webs_{uuid.uuid4().hex[:8]}"
        self.url = urllib.parse.urlunsplit(self.parts._replace(path=f"/{self.name}"))

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(urllib.parse.urlunsplit(self.parts), autocommit=True) as conn:
            conn.execute(sql)

    def create(self) -> str:
        self._admin(f'CREATE DATABASE "{self.name}"')
        return self.url

    def drop(self) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


class Http:
    """The product's send form, as a logged-in browser posts it (htmx), to one chosen web process."""

    def __init__(self) -> None:
        self.csrf: dict[tuple[int, str], str] = {}

    def _token(self, port: int, cookie: str, conversation_id: str) -> str:
        if (port, cookie) not in self.csrf:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/conversations/{conversation_id}/",
                                             headers={"Cookie": f"sessionid={cookie}"})
            with urllib.request.urlopen(request, timeout=60) as response:
                for header in response.headers.get_all("Set-Cookie") or []:
                    if header.startswith("csrftoken="):
                        self.csrf[(port, cookie)] = header.split(";", 1)[0].split("=", 1)[1]
            if (port, cookie) not in self.csrf:
                raise RuntimeError("the conversation page set no csrftoken cookie")
        return self.csrf[(port, cookie)]

    def send(self, port: int, cookie: str, conversation_id: str, text: str) -> float:
        """POST the message; returns time.time() right before the request (the submit time)."""
        token = self._token(port, cookie, conversation_id)
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/conversations/{conversation_id}/send",
            data=urllib.parse.urlencode({"text": text}).encode(), method="POST",
            headers={"Cookie": f"sessionid={cookie}; csrftoken={token}", "X-CSRFToken": token, "HX-Request": "true",
                     "Content-Type": "application/x-www-form-urlencoded"})
        sent = time.time()
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
        return sent


def command_calls(client) -> dict[str, float]:
    """Redis's calls per command since it started (INFO commandstats), and its CPU seconds
    (user + system, INFO cpu) as ``"cpu_s"``."""
    calls: dict[str, float] = {name.removeprefix("cmdstat_"): int(stats["calls"])
                               for name, stats in client.info("commandstats").items()}
    cpu = client.info("cpu")
    calls["cpu_s"] = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
    return calls


def members(client, conversation_ids: list[str]) -> dict[str, set[str]]:
    """The channel-layer group members of each conversation (channels_redis: asgi:group:<group>)."""
    pipe = client.pipeline(transaction=False)
    for cid in conversation_ids:
        pipe.zrange(f"asgi:group:conversation.{cid}", 0, -1)
    return {cid: {m.decode() for m in got} for cid, got in zip(conversation_ids, pipe.execute())}


def process_prefix(channel: str) -> str:
    """``specific.<the process's layer prefix>!<uuid>`` -> the process's prefix."""
    return channel.split("!", 1)[0]


@dataclass
class Watcher:
    """One open socket: which conversation it watches, which web process holds it, what it got."""

    index: int
    conversation: str
    web: str = "?"
    connect_s: float = 0.0
    ws: object = None
    messages: Counter = field(default_factory=Counter)  # sha1 of each message after the initial state
    received: int = 0
    stamped: dict[str, tuple[float, float]] = field(default_factory=dict)  # stream id -> (arrival, stamp)
    deltas: list[float] = field(default_factory=list)  # time.time() of each real delta's arrival
    done: int = 0  # turn-status "done"/"failed" lines seen
    titles: int = 0  # title changes seen
    closed_by_server: int | None = None


class Watchers:
    def __init__(self, redis_client, prefixes: dict[str, str]) -> None:
        self.redis = redis_client
        self.prefixes = prefixes  # channel-layer prefix -> web process name
        self.all: list[Watcher] = []
        self.readers: list[asyncio.Task] = []
        self.changed = asyncio.Event()
        self.closing = False
        self.unknown = 0  # sockets whose process could not be told

    async def open(self, url_of, plan: list[tuple[str, dict]]) -> None:
        """Open a socket for each (conversation id, headers), a few at a time, never two for one
        conversation at once: the member each batch adds to a conversation's group names the web
        process holding that batch's socket for it (the consumer joins before it sends the state)."""
        pending = list(enumerate(plan))
        while pending:
            batch, seen, rest = [], set(), []
            for item in pending:
                if item[1][0] not in seen and len(batch) < CONNECT_PARALLEL:
                    batch.append(item)
                    seen.add(item[1][0])
                else:
                    rest.append(item)
            pending = rest
            before = await asyncio.to_thread(members, self.redis, [c for _, (c, _) in batch])
            opened = await asyncio.gather(*(self._connect(i, c, url_of(c), h) for i, (c, h) in batch))
            after = await asyncio.to_thread(members, self.redis, [c for _, (c, _) in batch])
            for watcher in opened:
                new = after[watcher.conversation] - before[watcher.conversation]
                names = {self.prefixes.get(process_prefix(m)) for m in new}
                if len(new) == 1 and None not in names:
                    watcher.web = names.pop()
                else:
                    self.unknown += 1
                self.all.append(watcher)
                self.readers.append(asyncio.create_task(self._read(watcher)))

    async def _connect(self, index: int, conversation: str, url: str, headers: dict) -> Watcher:
        watcher = Watcher(index, conversation)
        start = time.perf_counter()
        watcher.ws = await websockets.connect(url, additional_headers=headers, open_timeout=60,
                                              max_size=2**24, compression=None)
        await asyncio.wait_for(watcher.ws.recv(), 60)  # the live state
        watcher.connect_s = time.perf_counter() - start
        return watcher

    async def _read(self, w: Watcher) -> None:
        try:
            async for message in w.ws:
                now = time.time()
                if not isinstance(message, str):
                    continue
                w.received += 1
                w.messages[hashlib.sha1(message.encode()).hexdigest()] += 1
                stamped = ID_RE.search(message)
                if stamped is not None:
                    stamp = STAMP_RE.search(message, stamped.end())
                    w.stamped.setdefault(stamped.group(0), (now, float(stamp.group(1)) if stamp else now))
                elif DELTA_RE.search(message):
                    w.deltas.append(now)
                if DONE_RE.search(message):
                    w.done += 1
                if TITLE_RE.search(message):
                    w.titles += 1
                self.changed.set()
        except websockets.ConnectionClosed as exc:
            if not self.closing:
                w.closed_by_server = exc.rcvd.code if exc.rcvd else -1

    async def until(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), min(remaining, 0.5))
            except TimeoutError:
                pass
        return True

    async def close(self) -> None:
        self.closing = True
        await close_sockets([w.ws for w in self.all if w.ws is not None], self.readers)


def losses(watchers: list[Watcher]) -> dict[str, int]:
    """Every socket of a conversation was open before the first event and until the last, so each
    must hold the same messages: per socket, what the conversation's sockets got together (each
    message as many times as any one of them got it) less what it got."""
    union: dict[str, Counter] = {}
    for w in watchers:
        union.setdefault(w.conversation, Counter())
        union[w.conversation] |= w.messages
    return {f"{w.web}#{w.index}": sum((union[w.conversation] - w.messages).values()) for w in watchers}
