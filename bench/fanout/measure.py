"""The live fan-out benchmark's measurement: the warm-up down each path, the per-user isolation
check, then a pass per socket count (and the largest again) on the four paths, with Redis's
connection figures around each pass."""
from __future__ import annotations

import asyncio
import os
import time

import websockets

from bench.fanout.environment import group_members, redis_clients, redis_connections_by_process
from bench.fanout.publisher import Publisher
from bench.fanout.rows import FLOOR, GROUP_SEND, PER_TASK, STREAM, Row
from bench.fanout.sockets import Watchers, run_rounds, run_stream, served_socket_paths

CPU_PROCESSES = ("web", "floor", "worker")
STREAM_INTERVAL = 0.05  # sessions.agent.loop.DELTA_FLUSH_SECONDS: a turn's delta cadence
WARM_TEXT = "lfb-warm-0-0-0"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc; 0.0 elsewhere)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU milliseconds each of the stack's processes spends while a row's rounds run."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = {name: pid for name, pid in pids.items() if name in CPU_PROCESSES}

    def start(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self, row: Row, started: dict[str, float]) -> None:
        row.cpu_ms = {name: (cpu_seconds(pid) - started[name]) * 1000 for name, pid in self.pids.items()}


async def measure(*, web_port: int, floor_port: int, seeded: dict, publisher: Publisher, redis_client,
                  redis_port: int, pids: dict[str, int],
                  sizes: tuple[int, ...], rounds: dict[int, int], timeout: float, pause: float,
                  interval: float = STREAM_INTERVAL, log=print) -> dict:
    conversations = seeded["conversations"]
    cookies = [u["cookie"] for u in seeded["users"]]
    web_origin = f"http://127.0.0.1:{web_port}"
    floor_origin = f"http://127.0.0.1:{floor_port}"

    def product_urls(n: int, served: dict[str, str] | None = None) -> list[tuple[str, str, dict]]:
        """The sockets of the first n conversations; ``served``: the socket path each one's page
        was served with (`served_socket_paths`), else the bare path (the whole state on connect)."""
        served = served or {}
        return [(c["id"], f"ws://127.0.0.1:{web_port}" + served.get(c["id"], f"/ws/conversations/{c['id']}/"),
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
    cpu = CpuMeter(pids)
    clients_by_size: dict[str, dict] = {}
    by_process_passes: dict[str, dict] = {}
    foreign = unexpected = full_states = 0
    dropped: dict[str, list] = {"product": [], "floor": []}
    connect_s: dict[str, list[float]] = {"product": [], "floor": []}

    async def size_pass(n: int, count: int, tag: str, repeat: bool) -> None:
        nonlocal foreign, unexpected, full_states
        # Each socket opens as its page would open it, just after the page was served (the pages
        # are fetched before the pass: their render is not part of the connect measured).
        served = await served_socket_paths(web_origin, [(c["id"], cookies[c["user"]]) for c in conversations[:n]])
        start = time.perf_counter()

        def add(path: str) -> Row:
            row = Row(n, path, repeat=repeat)
            rows.append(row)
            return row

        # Product sockets: the worker stream, one task per event, direct group_send.
        pw = Watchers()
        await pw.open(product_urls(n, served))
        connected_in = time.perf_counter() - start
        peak = redis_clients(redis_client)
        keys = pw.keys

        async def per_task(items, keys=keys):
            return await publisher.enqueue([(keys[i], event_id) for i, event_id in items])

        async def product_send(items, keys=keys):
            return await publisher.group_send([(f"conversation.{keys[i]}", event_id, payload.format(id=event_id))
                                               for i, event_id in items])

        row, at = add(STREAM), cpu.start()
        await run_stream(row, pw, publisher, list(keys), count, interval, timeout, pause, f"stream{tag}")
        cpu.stop(row, at)
        peak = max(peak, redis_clients(redis_client))
        for path, send, slug in ((PER_TASK, per_task, "task"), (GROUP_SEND, product_send, "product")):
            row, at = add(path), cpu.start()
            await run_rounds(row, pw, send, count, timeout, pause, f"{slug}{tag}")
            cpu.stop(row, at)
        peak = max(peak, redis_clients(redis_client))
        foreign += pw.foreign
        unexpected += pw.unexpected
        dropped["product"] += pw.server_closed
        connect_s["product"] += pw.connect_s
        full_states += pw.full_states
        await pw.close()

        fw = Watchers()
        await fw.open(floor_urls(n))
        fkeys = fw.keys

        async def floor_send(items, keys=fkeys):
            return await publisher.group_send([(f"floor.{keys[i]}", event_id, payload.format(id=event_id))
                                               for i, event_id in items])

        row, at = add(FLOOR), cpu.start()
        await run_rounds(row, fw, floor_send, count, timeout, pause, f"floor{tag}")
        cpu.stop(row, at)
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
            "connect_s": connect_s, "warmup_connect": warmup_connect, "full_states": full_states,
            "redis_by_process": {"before": by_process_before, **by_process_passes, "after": by_process_after},
            "payload_bytes": len(payload.format(id="lfb-x-0-0-0")),
            "delta_bytes": len(delta.encode())}
