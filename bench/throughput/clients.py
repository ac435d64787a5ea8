"""The simulator throughput benchmark's clients: N raw ``httpx`` clients on one event loop, taking
turns between the two servers in short slices, and the official ``anthropic`` SDK at 1 client."""
from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx

from bench.throughput.cells import MODES, SERVERS, Cell, Server, Side, process_cpu_seconds, turns

MODEL = "sim-claude-200k"
BODY = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "Hello from the benchmark."}]}
API_KEY = "bench-key"
HEADERS = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01", "content-type": "application/json"}


def describe(exc: BaseException) -> str:
    """An exception with its cause (httpx's ReadError says little without the socket error under it)."""
    cause = exc.__cause__ or exc.__context__
    return f"{exc!r}" + (f" from {cause!r}" if cause is not None else "")


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
