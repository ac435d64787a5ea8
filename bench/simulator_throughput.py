"""Requests/s and p50/p99 latency of the model simulator, beside a bare HTTP server in the same run.

Two processes on free loopback ports: the simulator as the integration stack starts it
(``tests.stack.Stack.start_simulator``) and the floor, ``bench/floor/http_messages.py``: the same
stdlib ``ThreadingHTTPServer`` stack answering one fixed reply of the same shape and size. Both
get the same small Messages request (``sim-claude-200k``, one short user message, ``max_tokens``
64) from the same client code: N concurrent clients, each an ``httpx.AsyncClient`` holding one
keep-alive connection, on one event loop in this process, each sending its next request as soon as
the last response has been read to the end (the whole JSON body, or the SSE stream up to
``message_stop``). Latency is request start to the last byte read; req/s is completed requests over
the time the clients were running.

Cells: 1, 8 and 32 clients, non-streaming and streaming. In a cell the two servers take turns in
short slices (simulator, floor, floor, simulator, ...) until each has had ``--seconds`` or
``--requests``, so machine noise falls on both alike. The warm-up opens every connection first,
one at a time (and they never expire), then runs each mode at the largest client count: the stdlib
server's listen backlog is 5, and a burst of new connections loses some to resets and holds the
rest for a SYN retransmit (~1 s). That burst is probed once at the end (the largest count of fresh
clients sending at once) and printed below the table. Per server and cell the table also gives
the server process's CPU time per request (from /proc), which does not depend on how loaded the
client is. Once the CPUs are saturated (on 2 cores the client alone takes ~1 ms a request) latency
is about clients / throughput, so there the added p50 grows with the number of clients queued.

Reference rows: the official ``anthropic`` SDK (sync client, ``messages.create`` and
``messages.stream(...).get_final_message()`` as the product calls it) at 1 client, both servers,
same alternation.

Target: the simulator adds < 5 ms p50 per request (added p50 = simulator p50 - floor p50) in
every raw-client cell; the SDK rows are for reference only. It exits 0 regardless.

Run: .venv/bin/python bench/simulator_throughput.py [--quick] [--clients 1,8,32] [--seconds 8]
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from tests.stack import Stack, free_port, wait_for_port  # noqa: E402

FLOOR_MODULE = "bench.floor.http_messages"
CLIENTS = (1, 8, 32)
SECONDS = 8.0  # per server per cell
SLICE = 0.5  # seconds a server runs before the other takes its turn
MAX_REQUESTS = 30_000  # per server per cell
WARMUP_SECONDS = 1.0  # per server per mode, at the largest client count
SDK_SECONDS = 3.0
TARGET_ADDED_P50_MS = 5.0
QUICK = {"clients": (1, 2), "seconds": 0.3, "slice": 0.1, "warmup": 0.2, "sdk_seconds": 0.2}

MODEL = "sim-claude-200k"
BODY = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Hello from the benchmark."}]}
API_KEY = "bench-key"
HEADERS = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}
MODES = ("non-stream", "stream")
SERVERS = ("simulator", "floor")


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))  # nearest rank
    return ordered[rank - 1]


def describe(exc: BaseException) -> str:
    """An exception with its cause (httpx's ReadError says little without the socket error under it)."""
    cause = exc.__cause__ or exc.__context__
    return f"{exc!r}" + (f" from {cause!r}" if cause is not None else "")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc (clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Side:
    """One server's figures in one cell, summed over its slices."""

    latencies_ms: list[float] = field(default_factory=list)
    busy_s: float = 0.0
    server_cpu_s: float = 0.0
    errors: int = 0
    first_error: str | None = None

    @property
    def rps(self) -> float | None:
        return len(self.latencies_ms) / self.busy_s if self.busy_s and self.latencies_ms else None

    @property
    def p50(self) -> float | None:
        return percentile(self.latencies_ms, 50)

    @property
    def p99(self) -> float | None:
        return percentile(self.latencies_ms, 99)

    @property
    def cpu_ms(self) -> float | None:
        return self.server_cpu_s * 1000 / len(self.latencies_ms) if self.latencies_ms else None

    def as_dict(self) -> dict:
        return {"requests": len(self.latencies_ms), "rps": self.rps, "p50_ms": self.p50, "p99_ms": self.p99,
                "server_cpu_ms_per_request": self.cpu_ms, "errors": self.errors, "first_error": self.first_error}


@dataclass
class Cell:
    client: str  # "httpx" or "sdk"
    mode: str
    clients: int
    sides: dict[str, Side] = field(default_factory=lambda: {name: Side() for name in SERVERS})
    client_cpu_s: float = 0.0

    @property
    def added_p50(self) -> float | None:
        sim, floor = self.sides["simulator"].p50, self.sides["floor"].p50
        return None if sim is None or floor is None else sim - floor

    def as_dict(self) -> dict:
        total = sum(len(s.latencies_ms) for s in self.sides.values())
        return {"client": self.client, "mode": self.mode, "clients": self.clients, "added_p50_ms": self.added_p50,
                "client_cpu_ms_per_request": self.client_cpu_s * 1000 / total if total else None,
                **{name: side.as_dict() for name, side in self.sides.items()}}


@dataclass
class Server:
    name: str
    url: str
    pid: int


def turns(slices: int) -> list[str]:
    """simulator, floor, floor, simulator, ...: each server goes first in half of the rounds."""
    order = []
    for i in range(slices):
        order += list(SERVERS) if i % 2 == 0 else list(reversed(SERVERS))
    return order


# --------------------------------------------------------------------------------------------------
# Raw HTTP clients (httpx, asyncio)
# --------------------------------------------------------------------------------------------------

async def one_request(client: httpx.AsyncClient, url: str, payload: bytes, stream: bool) -> tuple[float, int]:
    """Latency (ms) of one request read to its last byte, and the bytes read; raises on a bad reply."""
    started = time.perf_counter()
    async with client.stream("POST", url, content=payload, headers=HEADERS) as response:
        size, tail = 0, b""
        async for chunk in response.aiter_raw():
            size += len(chunk)
            tail = (tail + chunk)[-64:]
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"HTTP {response.status_code}")
    if stream and b"message_stop" not in tail:
        raise RuntimeError("stream ended before message_stop")
    return elapsed, size


async def run_slice(clients: list[httpx.AsyncClient], server: Server, payload: bytes, stream: bool,
                    seconds: float, max_requests: int, side: Side) -> None:
    url = f"{server.url}/v1/messages"
    done: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(client: httpx.AsyncClient) -> None:
        while time.perf_counter() < deadline and len(done) < max_requests:
            try:
                elapsed, _ = await one_request(client, url, payload, stream)
            except (httpx.HTTPError, RuntimeError) as exc:
                side.errors += 1
                side.first_error = side.first_error or describe(exc)
                await asyncio.sleep(0.01)  # a failing server must not turn the slice into a busy loop
                continue
            done.append(elapsed)

    cpu = process_cpu_seconds(server.pid)
    started = time.perf_counter()
    await asyncio.gather(*(loop(client) for client in clients))
    side.busy_s += time.perf_counter() - started
    side.server_cpu_s += process_cpu_seconds(server.pid) - cpu
    side.latencies_ms += done


async def connect_bursts(servers: dict[str, Server], n: int) -> dict[str, dict]:
    """For each server, n fresh clients send their first request at once: how it takes a burst of
    connects (a side figure, printed below the table)."""
    payload = json.dumps(BODY).encode()
    return {name: await connect_burst(server, payload, n) for name, server in servers.items()}


async def connect_burst(server: Server, payload: bytes, n: int) -> dict:
    clients = [httpx.AsyncClient(timeout=30.0) for _ in range(n)]
    url = f"{server.url}/v1/messages"

    async def first(client: httpx.AsyncClient) -> float | None:
        started = time.perf_counter()
        try:
            await one_request(client, url, payload, False)
        except (httpx.HTTPError, RuntimeError):
            return None
        return time.perf_counter() - started

    try:
        times = await asyncio.gather(*(first(client) for client in clients))
    finally:
        for client in clients:
            await client.aclose()
    ok = [t for t in times if t is not None]
    return {"failed": len(times) - len(ok), "slowest_s": max(ok, default=0.0)}


async def measure_httpx(servers: dict[str, Server], *, levels: tuple[int, ...], seconds: float, slice_s: float,
                        max_requests: int, warmup: float, log: Callable[[str], None]) -> tuple[list[Cell], dict]:
    payloads = {mode: json.dumps({**BODY, "stream": mode == "stream"}).encode() for mode in MODES}
    largest = max(levels)
    # No keep-alive expiry: httpx drops a connection idle for 5 s, so the clients a small cell leaves
    # idle would all reconnect at once when the next cell starts, into the listen backlog of 5.
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=None)
    pools = {name: [httpx.AsyncClient(limits=limits, timeout=30.0) for _ in range(largest)] for name in SERVERS}
    sizes: dict[str, dict[str, int]] = {}
    try:
        for name, server in servers.items():
            for client in pools[name]:  # one at a time: the listen backlog of 5 cannot overflow
                _, size = await one_request(client, f"{server.url}/v1/messages", payloads["non-stream"], False)
                sizes.setdefault(name, {})["non-stream"] = size
        for mode in MODES:
            for name, server in servers.items():
                _, size = await one_request(pools[name][0], f"{server.url}/v1/messages", payloads[mode],
                                            mode == "stream")
                sizes[name][mode] = size
                warm = Side()
                await run_slice(pools[name], server, payloads[mode], mode == "stream", warmup, 10 ** 9, warm)
                if warm.errors:
                    raise RuntimeError(f"{name} failed during warm-up ({mode}): {warm.first_error}")
        log(f"warm-up done: {largest} connections to each server; response bytes (body, as read) "
            + ", ".join(f"{name} {sizes[name]['non-stream']} JSON / {sizes[name]['stream']} SSE" for name in SERVERS))
        cells = []
        slices = max(1, round(seconds / slice_s))
        for mode in MODES:
            for n in levels:
                cell = Cell("httpx", mode, n)
                cpu = time.process_time()
                for name in turns(slices):
                    await run_slice(pools[name][:n], servers[name], payloads[mode], mode == "stream",
                                    seconds / slices, max(1, max_requests // slices), cell.sides[name])
                cell.client_cpu_s = time.process_time() - cpu
                cells.append(cell)
                log(f"  {mode:<10} {n:>3} clients: simulator {len(cell.sides['simulator'].latencies_ms)} requests, "
                    f"floor {len(cell.sides['floor'].latencies_ms)}")
        return cells, sizes
    finally:
        for pool in pools.values():
            for client in pool:
                await client.aclose()


# --------------------------------------------------------------------------------------------------
# The official SDK, 1 client (reference rows)
# --------------------------------------------------------------------------------------------------

def measure_sdk(servers: dict[str, Server], *, seconds: float, slice_s: float, max_requests: int,
                log: Callable[[str], None]) -> list[Cell]:
    import anthropic

    sdks = {name: anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=30.0)
            for name, server in servers.items()}
    kwargs = dict(BODY)

    def call(sdk: anthropic.Anthropic, mode: str) -> None:
        if mode == "stream":
            with sdk.messages.stream(**kwargs) as stream:
                message = stream.get_final_message()
        else:
            message = sdk.messages.create(**kwargs)
        if not message.content or message.content[0].type != "text":
            raise RuntimeError(f"unexpected reply: {message!r}")

    cells = []
    try:
        for mode in MODES:
            for name in SERVERS:  # first calls build the SDK's types and open the connection
                for _ in range(20):
                    call(sdks[name], mode)
            cell = Cell("sdk", mode, 1)
            slices = max(1, round(seconds / slice_s))
            cpu = time.process_time()
            for name in turns(slices):
                side, server = cell.sides[name], servers[name]
                server_cpu = process_cpu_seconds(server.pid)
                started = time.perf_counter()
                deadline = started + seconds / slices
                count = 0
                while time.perf_counter() < deadline and count < max(1, max_requests // slices):
                    t0 = time.perf_counter()
                    try:
                        call(sdks[name], mode)
                    except (anthropic.APIError, RuntimeError) as exc:
                        side.errors += 1
                        side.first_error = side.first_error or describe(exc)
                        continue
                    side.latencies_ms.append((time.perf_counter() - t0) * 1000)
                    count += 1
                side.busy_s += time.perf_counter() - started
                side.server_cpu_s += process_cpu_seconds(server.pid) - server_cpu
            cell.client_cpu_s = time.process_time() - cpu
            cells.append(cell)
            log(f"  sdk {mode:<10}   1 client:  simulator {len(cell.sides['simulator'].latencies_ms)} requests, "
                f"floor {len(cell.sides['floor'].latencies_ms)}")
    finally:
        for sdk in sdks.values():
            sdk.close()
    return cells


# --------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------

def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def report(cells: list[Cell], log: Callable[[str], None] = print) -> dict:
    group = f"{'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'cpu ms':>7}"
    log("")
    log(f"{'':<6} {'':<10} {'':>7}   {'simulator':-^31}   {'floor':-^31}")
    log(f"{'client':<6} {'mode':<10} {'clients':>7}   {group}   {group}   {'added p50 ms':>12}")
    for cell in cells:
        parts = []
        for name in SERVERS:
            side = cell.sides[name]
            parts.append(f"{fmt(side.rps, 1):>8} {fmt(side.p50):>7} {fmt(side.p99):>7} {fmt(side.cpu_ms):>7}")
        log(f"{cell.client:<6} {cell.mode:<10} {cell.clients:>7}   {parts[0]}   {parts[1]}   {fmt(cell.added_p50):>12}")
    log("cpu ms: the server process's CPU time per request; sdk rows: the official anthropic SDK (reference)")
    for cell in cells:
        for name in SERVERS:
            side = cell.sides[name]
            if side.errors:
                log(f"WARNING: {cell.client} {cell.mode} {cell.clients} clients: {side.errors} failed requests "
                    f"on the {name}, first: {side.first_error}")
    log("client CPU per request (this process): " + ", ".join(
        f"{c.client} {c.mode} x{c.clients} {fmt(c.as_dict()['client_cpu_ms_per_request'])} ms" for c in cells))
    judged = [cell for cell in cells if cell.client == "httpx"]
    missing = [cell for cell in judged if cell.added_p50 is None]
    worst = max((cell for cell in judged if cell.added_p50 is not None), key=lambda c: c.added_p50, default=None)
    ok = not missing and worst is not None and worst.added_p50 < TARGET_ADDED_P50_MS
    detail = f"worst added p50 {worst.added_p50:.2f} ms ({worst.mode}, {worst.clients} clients)" if worst else "no data"
    if missing:
        detail += "; no figures for " + ", ".join(f"{c.mode} x{c.clients}" for c in missing)
    log("")
    log(f"{'PASS' if ok else 'FAIL'}  simulator adds < {TARGET_ADDED_P50_MS:.0f} ms p50 per request "
        f"(every httpx cell): {detail}")
    over = {id(c) for c in judged if c.added_p50 is None or c.added_p50 >= TARGET_ADDED_P50_MS}
    log("      added p50 by cell: " + ", ".join(
        f"{c.mode} x{c.clients} {fmt(c.added_p50)} ms{' (over)' if id(c) in over else ''}" for c in judged))
    added_cpu = {}
    for mode in MODES:
        per_server = {}
        for name in SERVERS:
            sides = [c.sides[name] for c in judged if c.mode == mode]
            requests = sum(len(side.latencies_ms) for side in sides)
            per_server[name] = sum(side.server_cpu_s for side in sides) * 1000 / requests if requests else None
        if None not in per_server.values():
            added_cpu[mode] = per_server["simulator"] - per_server["floor"]
    log("      added server CPU per request (simulator - floor, over the httpx cells): " + ", ".join(
        f"{mode} {value:.2f} ms" for mode, value in added_cpu.items()))
    return {"target_met": ok, "worst_added_p50_ms": worst.added_p50 if worst else None,
            "added_cpu_ms_per_request": added_cpu}


# --------------------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------------------

def bench_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_SIM_")}  # defaults: no faults, any key
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(*, levels: tuple[int, ...] = CLIENTS, seconds: float = SECONDS, slice_s: float = SLICE,
        max_requests: int = MAX_REQUESTS, warmup: float = WARMUP_SECONDS, sdk_seconds: float = SDK_SECONDS,
        keep: bool = False, log: Callable[[str], None] = print) -> dict:
    """Start both servers, measure, print the table; return the figures. Both processes are stopped."""
    started = time.perf_counter()
    log_dir = Path(tempfile.mkdtemp(prefix="hermes-sim-throughput-"))
    stack = Stack(env=bench_env(), log_dir=log_dir)
    failed = True
    try:
        sim_url = stack.start_simulator()
        floor_port = free_port()
        floor = stack._spawn("floor", [sys.executable, "-m", FLOOR_MODULE, "--host", "127.0.0.1",
                                       "--port", str(floor_port)])
        wait_for_port(floor_port, floor, what="floor")
        servers = {"simulator": Server("simulator", sim_url, stack.procs["simulator"].pid),
                   "floor": Server("floor", f"http://127.0.0.1:{floor_port}", floor.pid)}
        log(f"simulator {sim_url} ({' '.join(map(str, stack.procs['simulator'].args[1:3]))}), floor "
            f"{servers['floor'].url} ({FLOOR_MODULE}); {seconds:g} s or {max_requests} requests per server per "
            f"cell in {slice_s:g} s turns; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        cells, sizes = asyncio.run(measure_httpx(servers, levels=levels, seconds=seconds, slice_s=slice_s,
                                                 max_requests=max_requests, warmup=warmup, log=log))
        cells += measure_sdk(servers, seconds=sdk_seconds, slice_s=slice_s, max_requests=max_requests, log=log)
        bursts = asyncio.run(connect_bursts(servers, max(levels)))
        verdict = report(cells, log=log)
        log(f"{max(levels)} new connections at once, after the table's runs (listen backlog 5): " + "; ".join(
            f"{name} {b['failed']} failed, slowest {b['slowest_s']:.2f} s" for name, b in bursts.items()))
        log(f"total {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f} at the end")
        failed = False
        return {"cells": [cell.as_dict() for cell in cells], "response_bytes": sizes, "connect_burst": bursts,
                **verdict}
    finally:
        stack.stop()
        if keep or failed:
            log(f"logs kept in {log_dir}")
        else:
            shutil.rmtree(log_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny run (1 and 2 clients, fractions of a second)")
    parser.add_argument("--clients", default=None, help="client counts, comma separated (default 1,8,32)")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per server per cell")
    parser.add_argument("--requests", type=int, default=MAX_REQUESTS, help="requests per server per cell at most")
    parser.add_argument("--keep", action="store_true", help="keep the process logs")
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else {"clients": CLIENTS, "seconds": SECONDS, "slice": SLICE,
                                       "warmup": WARMUP_SECONDS, "sdk_seconds": SDK_SECONDS}
    levels = tuple(int(s) for s in args.clients.split(",") if s) if args.clients else preset["clients"]
    if not levels or min(levels) < 1:
        parser.error("--clients: positive counts, comma separated")
    seconds = args.seconds if args.seconds is not None else preset["seconds"]
    return run(levels=levels, seconds=seconds, slice_s=min(preset["slice"], seconds), max_requests=args.requests,
               warmup=preset["warmup"], sdk_seconds=preset["sdk_seconds"], keep=args.keep)


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _terminate)
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped", file=sys.stderr)
    sys.exit(0)
