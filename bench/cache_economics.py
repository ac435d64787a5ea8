"""Prompt-cache economics of each caching strategy on seeded replays of six workloads, under the
documented caching rules and, beside them, under the optimistic reading of the one point the
documentation leaves open (docs/simulator.md, "Caching").

The workloads (bench/economics/workload.py and scenarios.py, where each one's mix is explained): a
workspace of ~40 files from 1.5K to 60K characters (code, docs, CSV) and ``--turns`` user messages
(default 160), each after a pause:
- ``steady``: tool-heavy (read one or two files, search, list, write a file, recall an earlier fact
  ("what ...?"), chat); 80 % of pauses log-normal around 25 s (5–90 s), 16 % 2–15 min, 3 % 20–50
  min, 1 % 1–2 h;
- ``bursty``: the same turns; bursts of quick turns (84 %, around 12 s) cut by breaks: 4 % 5.5–10
  min, 7.2 % 12–55 min, 4.8 % 65 min–3 h;
- ``chat``: no tools at all; long messages (questions with context, pasted emails, notes, logs,
  code, tables and drafts, follow-ups, recall questions); reading, thinking and typing time;
- ``rapid``: tool work and quick questions, every pause under 5 minutes;
- ``sparse``: a few visits a day; 65 % of pauses from 1 h to a day, the rest shorter;
- ``day``: a morning burst, a 45–90 min lunch, an afternoon of tool work, a 3–6 h break and a
  few evening turns.
``--seeds N`` replays seeds 1..N of each: seed 1 is the workload's own seed (for steady and bursty,
the workload this benchmark has always replayed), seed k changes the pauses, the texts and the
files. Every model call also takes ``CALL_SECONDS`` of simulated time. The model is ``sim-claude-200k``
(threshold 100,000 tokens), so the context is compressed several times.

Each strategy replays each workload and seed once through the real agent loop (``turn_submit`` with Celery
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

The headline, per workload (``report``): each strategy's whole bill (``total $`` below: agent input
and output, cache writes and reads, the summariser's calls, at catalogue prices) in dollars per 100
turns, median and min-max over the seeds; its ratio to ``system_and_3``'s bill on the same seed
(median, min-max); ``x limit`` (below, input cost only); the compactions (median). Then a summary
over the workloads: per strategy, the median of the workloads' median ratios and the worst one.
The header gives the date and the load average; the end, the load average again and the wall time.

``--detail`` adds, per workload and seed, every strategy under both modes side by side (``table``).
Its columns, per strategy and mode (agent calls unless stated):
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
Every strategy of a workload and seed must send the same requests (same prompt tokens, call by
call): the bench checks it, so the strategies differ in billing only, never in what the model saw (the same
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

``--timing off|on|both`` replays with cache-aware compaction timing off, on, or each way (both,
the default; a strategy run with it on is labelled ``name+timing``; ratios stay against
``system_and_3`` with it off).
``--idle-when due_this_turn|at_share`` picks the timing's idle rule
(``compression.idle_compaction_when``; default: the product's).

The parts live in bench/economics/: ``workload``, ``scenarios`` and ``texts`` (the workloads),
``accounting`` (costs, the lower bound, re-warm), ``replay`` (the agent loop against the recording
simulator), ``report`` (the headline) and ``table`` (the detail).

Run: .venv/bin/python bench/cache_economics.py [--workloads all] [--seeds 3] [--turns 160]
     [--strategies none,system_and_3,...] [--jobs 2] [--detail] [--timing both] [--idle-when at_share]
Targets (in the detail), per workload and seed, under the documented rules: system_and_3 <= 25 %
of the no-cache input cost; the best strategy >= 15 % cheaper than system_and_3 with no more
compressions.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
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
from bench.economics.report import (  # noqa: E402
    TIMING_SUFFIX,
    format_summary,
    format_workload,
    label,
    workload_rows,
)
from bench.economics.table import format_table, verdict  # noqa: E402
from bench.economics.workload import (  # noqa: E402
    DEFAULT_TURNS,
    MODEL,
    PAUSE_PATTERNS,
    WORKLOADS,
    UserTurn,
    Workload,
    build_workload,
    make_workload,
)
from compression.core.compaction_timing import DEFAULT_IDLE_WHEN, IDLE_WHEN_CHOICES  # noqa: E402

# What the tests take from here.
__all__ = ["MODEL", "MODES", "PAUSE_PATTERNS", "WORKLOADS", "Call", "UserTurn", "Workload", "_quiet",
           "build_workload", "format_table", "input_cost", "lower_bound", "main", "make_workload", "replay",
           "rewarm_counts", "same_requests", "summarize"]

DEFAULT_STRATEGIES = ("none", "system_and_3", "system_and_3@1h", "stable_prefix", "warm_anchor", "rolling_1h")
DEFAULT_WORKLOADS = ("steady", "bursty")
TIMINGS = {"off": (False,), "on": (True,), "both": (False, True)}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _run_all(tasks: list[tuple[str, int, str, bool]], loads: dict[tuple[str, int], Workload], turns: int,
             jobs: int, out: Callable[[str], None] | None,
             idle_when: str | None = None) -> dict[tuple[str, int, str, bool], dict[str, Any]]:
    """Every (workload, seed, spec, timing) replay: in ``jobs`` worker processes (each with its own
    throwaway database; the replays are independent), or here when ``jobs`` is 1."""
    if jobs > 1 and len(tasks) > 1:
        ctx = multiprocessing.get_context("spawn")
        done = {}
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=ctx) as pool:
            futures = {pool.submit(_replay_in_worker, spec, turns, w, seed, timing, idle_when): (w, seed, spec, timing)
                       for w, seed, spec, timing in tasks}
            for future in concurrent.futures.as_completed(futures):
                key = futures[future]
                done[key] = future.result()
                if out:
                    out(f"  [{len(done)}/{len(tasks)}] {key[0]} seed {key[1]} {label(key[2], key[3])}: "
                        f"{done[key]['seconds']:.0f} s")
        return done
    _ensure_django()
    _quiet()
    return {(w, seed, spec, timing): replay(spec, loads[(w, seed)], progress=out, timing=timing, idle_when=idle_when)
            for w, seed, spec, timing in tasks}


def main(turns: int = DEFAULT_TURNS, strategies: Sequence[str] = DEFAULT_STRATEGIES,
         workloads: Sequence[str] = DEFAULT_WORKLOADS, out: Callable[[str], None] | None = print,
         jobs: int = 1, seeds: int = 1, detail: bool = False, timing: str = "off",
         idle_when: str | None = None) -> dict[str, Any]:
    """Replay seeds 1..``seeds`` of each workload once per strategy (and per ``timing`` setting);
    print the headline per workload and the summary (unless ``out`` is None), with ``detail`` the
    per-seed tables too. Returns ``{"runs": {workload: {seed: {label: result}}}, "workloads_by_seed":
    {workload: {seed: Workload}}, "results"/"workloads": seed 1's of each workload, "rows": the
    headline figures, "seconds", "load": (at start, at end)}``; a result is ``replay``'s
    (``{"documented"/"optimistic": {"calls", "figures"}, ...}``).

    ``jobs`` > 1 runs the replays in that many worker processes; ``jobs=1`` runs them here, in this
    Django setup."""
    started, load_start = time.perf_counter(), _load()
    if out:
        out(f"cache economics, {time.strftime('%Y-%m-%d %H:%M')}: {len(workloads)} workloads x {seeds} seeds x "
            f"{len(strategies)} strategies, {turns} turns, {jobs} jobs, timing {timing}"
            f"{f' ({idle_when or DEFAULT_IDLE_WHEN})' if timing != 'off' else ''}; load average at start "
            f"{load_start}")
    seed_list = range(1, seeds + 1)
    loads = {(w, s): make_workload(w, s, turns) for w in workloads for s in seed_list}
    tasks = [(w, s, spec, t) for w in workloads for s in seed_list for t in TIMINGS[timing] for spec in strategies]
    done = _run_all(tasks, loads, turns, jobs, out, idle_when)
    runs = {w: {s: {label(spec, t): done[(w, s, spec, t)] for t in TIMINGS[timing] for spec in strategies}
                for s in seed_list} for w in workloads}
    by_seed = {w: {s: loads[(w, s)] for s in seed_list} for w in workloads}
    rows = {w: workload_rows(runs[w], {s: len(by_seed[w][s].turns) for s in seed_list}) for w in workloads}
    seconds = time.perf_counter() - started
    load_end = _load()
    if out:
        out("")
        for w in workloads:
            out(format_workload(w, runs[w], by_seed[w]))
            out("")
            if detail:
                _print_detail(runs[w], by_seed[w], out)
        out(format_summary(rows))
        out("")
        out(f"wall time {seconds:.0f} s; load average at end {load_end}")
    return {"runs": runs, "workloads_by_seed": by_seed, "results": {w: runs[w][1] for w in workloads},
            "workloads": {w: by_seed[w][1] for w in workloads}, "rows": rows, "seconds": seconds,
            "load": (load_start, load_end)}


def _print_detail(runs: dict[int, dict[str, Any]], loads: dict[int, Workload], out: Callable[[str], None]) -> None:
    for s, results in runs.items():
        for timed in (False, True):
            group = {lab: r for lab, r in results.items() if lab.endswith(TIMING_SUFFIX) == timed}
            if not group:
                continue
            out(f"seed {s}{' (timing on)' if timed else ''}:")
            out(format_table(group, loads[s]))
            for line in verdict(group):
                out(line)
            out("")


def _names(raw: str, known: Sequence[str], what: str, parser: argparse.ArgumentParser) -> list[str]:
    names = list(known) if raw == "all" else [n for n in raw.split(",") if n]
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(known)})")
    return names


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help="comma-separated strategy names, name@1h for a 1h cache_ttl")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"comma-separated workloads, or all ({', '.join(WORKLOADS)})")
    parser.add_argument("--seeds", type=int, default=1, help="replay seeds 1..N of each workload")
    parser.add_argument("--jobs", type=int, default=2,
                        help="worker processes (each replay runs in one); 1 = in this process")
    parser.add_argument("--detail", action="store_true",
                        help="also print every strategy under both modes, per workload and seed")
    parser.add_argument("--timing", choices=tuple(TIMINGS), default="both",
                        help="cache-aware compaction timing: each strategy without and with it (both, the "
                             "default), or only off or on")
    parser.add_argument("--idle-when", choices=IDLE_WHEN_CHOICES, default=None,
                        help="which cold returns compact when the timing is on (compression.idle_compaction_when; "
                             f"default: the product's, {DEFAULT_IDLE_WHEN})")
    args = parser.parse_args()
    if args.seeds < 1 or args.turns < 1 or args.jobs < 1:
        parser.error("--seeds, --turns and --jobs must be at least 1")
    main(turns=args.turns, strategies=[s for s in args.strategies.split(",") if s],
         workloads=_names(args.workloads, WORKLOADS, "workloads", parser), jobs=args.jobs, seeds=args.seeds,
         detail=args.detail, timing=args.timing, idle_when=args.idle_when)
