"""The live fan-out benchmark's printed report: the table, the verdicts against its targets, and
what the server logs and Redis say about the run."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bench.fanout.rows import FLOOR, GROUP_SEND, STREAM, Row
from bench.fanout.sockets import CONNECT_PARALLEL
from bench.stats import percentile

if TYPE_CHECKING:
    from tests.stack import Stack

TARGET_P99_MS = 100.0
TARGET_FLOOR_RATIO = 1.5
TARGET_N = 50
# The worker stream's p99 targets by socket count, and the connect's limit against the floor's.
STREAM_P99_TARGETS_MS = {50: 25.0, 200: 100.0}
TARGET_CONNECT_RATIO = 3.0


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


def daphne_us_per_event(row: Row) -> float | None:
    """CPU microseconds the Daphne that relays the row's events spent per event received (the
    product's for the product paths, the floor's for the floor's): a figure load disturbs far less
    than latency."""
    ms = row.cpu_ms.get("floor" if row.path == FLOOR else "web")
    received = len(row.latencies_ms)
    return None if ms is None or not received else ms * 1000 / received


def fmt_cpu(row: Row) -> str:
    us = daphne_us_per_event(row)
    return "-" if us is None else f"{us:.0f} us"


def report(result: dict, sizes: tuple[int, ...], log=print) -> dict:
    rows: list[Row] = result["rows"]
    log("")
    log(f"{'N':>5}  {'path':<24} {'events':>7} {'p50 ms':>8} {'p99 ms':>8} {'delivered':>10} {'Daphne CPU/event':>17}")
    for row in rows:
        late = f"  ({row.late} late)" if row.late else ""
        error = f"  [{row.error}]" if row.error else ""
        n = f"{row.n}*" if row.repeat else str(row.n)
        log(f"{n:>5}  {row.path:<24} {row.sent:>7} {fmt_ms(row.p50):>8} {fmt_ms(row.p99):>8} "
            f"{row.delivered * 100:>9.1f}% {fmt_cpu(row):>17}{late}{error}")
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
    for n, target in STREAM_P99_TARGETS_MS.items():
        if (n, STREAM) in by:
            p99 = by[(n, STREAM)].p99
            verdict(f"worker stream p99 < {target:.0f} ms at N={n}", p99 is not None and p99 < target, f"p99 {fmt_ms(p99)} ms")
    product_connect, floor_connect = result["connect_s"]["product"], result["connect_s"]["floor"]
    if product_connect and floor_connect:
        p, f = percentile(product_connect, 50), percentile(floor_connect, 50)
        verdict(f"connect p50 within {TARGET_CONNECT_RATIO:.0f}x the floor's", p <= TARGET_CONNECT_RATIO * f,
                f"{p * 1000:.1f} / {f * 1000:.1f} ms = {p / f:.2f}x")
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
            whole = (f"; the whole live state on {result.get('full_states', 0)} of {len(times)} (the others: "
                     "\"in step\", their page current)") if app == "product" else ""
            log(f"{app} connect (handshake -> initial message, {CONNECT_PARALLEL} at a time): "
                f"p50 {percentile(times, 50) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms{whole}")
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
            log(f"worker stream N={row.n}{'*' if row.repeat else ''}: {w['published']} deltas in "
                f"{w.get('calls', w['published'])} push calls, each "
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
