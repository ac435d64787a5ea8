"""The simulator throughput benchmark's printed report: the table of cells, the failed requests,
and the verdict against its target (the simulator adds < 5 ms p50 per request)."""
from __future__ import annotations

from collections.abc import Callable

from bench.throughput.cells import MODES, SERVERS, Cell

TARGET_ADDED_P50_MS = 5.0


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
