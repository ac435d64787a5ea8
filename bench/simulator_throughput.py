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

The parts live in bench/throughput/: ``cells`` (the figures), ``clients`` (httpx and the SDK),
``report`` (the table and the verdict); the floor server in bench/floor/.

Run: .venv/bin/python bench/simulator_throughput.py [--quick] [--clients 1,8,32] [--seconds 8]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common_cli import keep_or_remove, log_total, machine_load, run_main  # noqa: E402
from bench.throughput.cells import MODES, SERVERS, Server  # noqa: E402
from bench.throughput.clients import connect_bursts, measure_httpx, measure_sdk  # noqa: E402
from bench.throughput.report import report  # noqa: E402
from tests.stack import Stack, free_port, wait_for_port  # noqa: E402

__all__ = ["MODES", "QUICK", "SERVERS", "main"]  # what the smoke test takes from here

FLOOR_MODULE = "bench.floor.http_messages"
CLIENTS = (1, 8, 32)
SECONDS = 8.0  # per server per cell
SLICE = 0.5  # seconds a server runs before the other takes its turn
MAX_REQUESTS = 30_000  # per server per cell
WARMUP_SECONDS = 1.0  # per server per mode, at the largest client count
SDK_SECONDS = 3.0
QUICK = {"clients": (1, 2), "seconds": 0.3, "slice": 0.1, "warmup": 0.2, "sdk_seconds": 0.2}


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
            f"cell in {slice_s:g} s turns; {machine_load()}")
        cells, sizes = asyncio.run(measure_httpx(servers, levels=levels, seconds=seconds, slice_s=slice_s,
                                                 max_requests=max_requests, warmup=warmup, log=log))
        cells += measure_sdk(servers, seconds=sdk_seconds, slice_s=slice_s, max_requests=max_requests, log=log)
        bursts = asyncio.run(connect_bursts(servers, max(levels)))
        verdict = report(cells, log=log)
        log(f"{max(levels)} new connections at once, after the table's runs (listen backlog 5): " + "; ".join(
            f"{name} {b['failed']} failed, slowest {b['slowest_s']:.2f} s" for name, b in bursts.items()))
        log_total(started, log)
        failed = False
        return {"cells": [cell.as_dict() for cell in cells], "response_bytes": sizes, "connect_burst": bursts,
                **verdict}
    finally:
        stack.stop()
        keep_or_remove(log_dir, log_dir, keep or failed, log)


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


if __name__ == "__main__":
    run_main(main)
