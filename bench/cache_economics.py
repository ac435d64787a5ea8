"""Prompt-cache economics of each caching strategy on two fixed, seeded, tool-heavy replays, under
the documented caching rules and, beside them, under the optimistic reading of the one point the
documentation leaves open (docs/simulator.md, "Caching").

The workload (``build_workload``): a workspace of ~40 files from 1.5K to 60K characters (code,
docs, CSV); ``--turns`` user messages (default 160) asking to read one or two files, search, list,
write a file, recall an earlier fact ("what ...?") or chat. Before each turn the user pauses, by
one of two patterns, each with its own seed (``SEEDS``):
- ``steady``: 80 % log-normal around 25 s (5–90 s), 16 % 2–15 min, 3 % 20–50 min, 1 % 1–2 h;
- ``bursty``: bursts of quick turns (84 %, around 12 s) cut by breaks: 4 % 5.5–10 min, 7.2 %
  12–55 min, 4.8 % 65 min–3 h.
Every model call also takes ``CALL_SECONDS`` of simulated time. The model is ``sim-claude-200k``
(threshold 100,000 tokens), so the context is compressed several times.

Each strategy replays each workload once through the real agent loop (``turn_submit`` with Celery
eager, then ``turn_drain``) against a fresh in-process simulator whose ``SimClock`` the bench moves
by each pause, with ``prompt_caching.strategy``/``cache_ttl`` saved through the settings store. A
spec ``name@1h`` runs a strategy with ``cache_ttl = 1h`` (default 5m). The simulator bills in its
default ``documented`` mode, so the product records documented usage; the same requests also go,
in order, through a second prefix cache in ``optimistic`` mode, whose usage gives the optimistic
columns. The requests do not depend on the mode (the product reacts to prompt sizes, which the
mode does not change), so both columns describe the one call sequence. Costs come from the
``ApiCall`` rows the product records (documented; purpose ``agent`` and ``compression``) and from
the second cache's results (optimistic), priced with ``llm.usage.compute_cost`` and the model's
catalog price (USD per million tokens); the bench checks the rows against the simulator's own
accounting, call by call.

Columns, per strategy and mode (agent calls unless stated):
- ``input $``: billed input cost = input x in + cache_read x read + write_5m x w5m + write_1h x w1h;
- ``vs none``: that cost / the same calls' prompt tokens at the base input price (no caching);
- ``vs s&3``: that cost / ``system_and_3``'s in the same mode on the same replay;
- ``hit``: token-weighted hit rate, sum(cache_read) / sum(prompt tokens);
- ``write%``: share of the input cost that is cache writes (5m + 1h);
- ``x limit``: input cost / the lower bound below;
- ``rewarm`` (documented): per compression, agent calls from the first call after it up to and
  including the first whose own hit rate (cache_read / prompt) is at least ``REWARM_HIT_RATE``
  (50 %); the mean, and every value in the detail line;
- ``total $`` (documented): agent input + output plus the summariser's calls (input + output).
Every strategy of a workload must send the same requests (same prompt tokens, call by call): the
bench checks it, so the strategies differ in billing only, never in what the model saw (the same
compressions, the same fidelity).

Lower bound (``lower_bound``), computed from the same replay's agent requests as the simulator
flattened them (blocks in prefix order: tools, system, message content blocks; the block hashes
chain the whole prefix, cache markers stripped, so they do not depend on the strategy):
for each request in order, R = the tokens of its longest block prefix that an earlier request
already sent and that was last sent at most 1 hour before (the longest TTL anyone can buy; sending
it again refreshes it), billed at the cache-hit price; every other token is new: billed once at
the 5m write price if a later request reads it back within that hour chain, else at the base input
price (it never needed caching). It holds under the documented rules: every token is either read
(>= hit price, only if that prefix was sent within the hour) or billed at least at the base price,
and a token read later must have been written (>= 5m write price) once. A reuse more than 5 minutes
later needs no 1h write of that token: a 1h breakpoint one block further on is billed at 1h only for
what it newly writes (B - A) yet stores an entry for the whole prefix, so a prefix written at the
5m price stays readable for an hour ("rolling_1h" rests on this). The bound ignores the minimum
cacheable length, the 20-position lookback, the 4-breakpoint limit and that one-block premium.

The parts live in bench/economics/: ``workload``, ``accounting`` (costs, the lower bound, re-warm),
``replay`` (the agent loop against the recording simulator) and ``table`` (the printed output).

Run: .venv/bin/python bench/cache_economics.py [--turns 160] [--strategies none,system_and_3,...]
     [--workloads steady,bursty] [--jobs 2]
Targets, per workload, under the documented rules: system_and_3 <= 25 % of the no-cache input
cost; the best strategy >= 15 % cheaper than system_and_3 with no more compressions.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.economics.accounting import (  # noqa: E402
    MODES,
    Call,
    input_cost,
    lower_bound,
    rewarm_counts,
    same_requests,
    summarize,
)
from bench.economics.replay import _ensure_django, _quiet, _replay_in_worker, replay  # noqa: E402
from bench.economics.table import format_table, verdict  # noqa: E402
from bench.economics.workload import (  # noqa: E402
    DEFAULT_TURNS,
    MODEL,
    PAUSE_PATTERNS,
    UserTurn,
    Workload,
    build_workload,
)

# What the tests take from here.
__all__ = ["MODEL", "MODES", "PAUSE_PATTERNS", "Call", "UserTurn", "Workload", "_quiet", "build_workload",
           "format_table", "input_cost", "lower_bound", "main", "replay", "rewarm_counts", "same_requests",
           "summarize"]

DEFAULT_STRATEGIES = ("none", "system_and_3", "system_and_3@1h", "stable_prefix", "warm_anchor", "rolling_1h")
DEFAULT_WORKLOADS = ("steady", "bursty")


def main(turns: int = DEFAULT_TURNS, strategies: Sequence[str] = DEFAULT_STRATEGIES,
         workloads: Sequence[str] = DEFAULT_WORKLOADS, out: Callable[[str], None] | None = print,
         jobs: int = 1) -> dict[str, Any]:
    """Replay each workload once per strategy; print a table per workload (unless ``out`` is None);
    return ``{"results": {workload: {spec: {"documented"/"optimistic": {"calls", "figures"}}}},
    "workloads": {name: Workload}, "seconds": ...}``.

    ``jobs`` > 1 runs the replays in that many worker processes, each with its own throwaway
    database (the replays are independent); ``jobs=1`` runs them here, in this Django setup."""
    started = time.perf_counter()
    loads = {name: build_workload(turns, pattern=name) for name in workloads}
    pairs = [(w, s) for w in workloads for s in strategies]
    if jobs > 1 and len(pairs) > 1:
        import concurrent.futures
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(pairs)), mp_context=ctx) as pool:
            futures = {(w, s): pool.submit(_replay_in_worker, s, turns, w) for w, s in pairs}
            done = {pair: futures[pair].result() for pair in pairs}
    else:
        _ensure_django()
        _quiet()
        done = {(w, s): replay(s, loads[w], progress=out) for w, s in pairs}
    results = {w: {s: done[(w, s)] for s in strategies} for w in workloads}
    seconds = time.perf_counter() - started
    if out:
        for w in workloads:
            out(format_table(results[w], loads[w]))
            for line in verdict(results[w]):
                out(line)
            out("")
        out(f"wall time {seconds:.0f} s")
    return {"results": results, "workloads": loads, "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help="comma-separated strategy names, name@1h for a 1h cache_ttl")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"comma-separated pause patterns ({', '.join(PAUSE_PATTERNS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes (each replay runs in its own); 1 = in this process")
    args = parser.parse_args()
    main(turns=args.turns, strategies=[s for s in args.strategies.split(",") if s],
         workloads=[w for w in args.workloads.split(",") if w], jobs=args.jobs)
