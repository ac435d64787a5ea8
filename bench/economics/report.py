"""The cache-economics benchmark's headline: per workload, each strategy's whole bill over the
seeds (dollars per 100 turns, its ratio to ``system_and_3``'s, its input cost over the lower
bound, its compactions), then a summary over the workloads.

A run is keyed by its label: the strategy spec, with ``TIMING_SUFFIX`` when it ran with
cache-aware compaction timing on. Ratios are taken seed by seed against the baseline's run on the
same workload and seed, then summarised (median and min-max); the summary takes each workload's
median ratio, then their median and the worst."""
from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from bench.economics.accounting import same_requests
from bench.economics.workload import MODEL, Workload

BASELINE = "system_and_3"
TIMING_SUFFIX = "+timing"
Spread = tuple[float, float, float]  # median, min, max


def label(spec: str, timing: bool) -> str:
    return spec + TIMING_SUFFIX if timing else spec


def spread(values: Sequence[float]) -> Spread:
    return statistics.median(values), min(values), max(values)


def _figures(res: Mapping[str, Any]) -> Mapping[str, Any]:
    return res["documented"]["figures"]


def per_100_turns(res: Mapping[str, Any], turns: int) -> float:
    """The whole bill (agent input and output, cache writes and reads, the summariser's calls, at
    catalogue prices) per 100 user turns."""
    return _figures(res)["total_cost"] * 100.0 / turns


def floor_cost(res: Mapping[str, Any]) -> float:
    """The whole bill of the same requests with the agent's input billed at its lower bound: what
    no caching strategy can go below without sending other requests."""
    f = _figures(res)
    return f["total_cost"] - f["input_cost"] + f["lower_bound"]


def workload_rows(by_seed: Mapping[int, Mapping[str, Mapping[str, Any]]], turns: Mapping[int, int],
                  baseline: str = BASELINE) -> dict[str, dict[str, Any]]:
    """Per label: ``per_100``, ``ratio`` (to ``baseline``, None without it), ``floor`` (``floor_cost``
    over the baseline's whole bill, None without it), ``x_limit`` as spreads over the seeds;
    ``compactions`` (median) and ``failed_turns`` (sum)."""
    labels = list(dict.fromkeys(lab for runs in by_seed.values() for lab in runs))
    rows: dict[str, dict[str, Any]] = {}
    for lab in labels:
        seeds = [s for s, runs in by_seed.items() if lab in runs]
        bills = [per_100_turns(by_seed[s][lab], turns[s]) for s in seeds]
        based = [s for s in seeds if baseline in by_seed[s] and _figures(by_seed[s][baseline])["total_cost"]]
        ratios = [_figures(by_seed[s][lab])["total_cost"] / _figures(by_seed[s][baseline])["total_cost"] for s in based]
        floors = [floor_cost(by_seed[s][lab]) / _figures(by_seed[s][baseline])["total_cost"] for s in based]
        rows[lab] = {
            "per_100": spread(bills),
            "ratio": spread(ratios) if len(ratios) == len(seeds) else None,
            "floor": spread(floors) if len(floors) == len(seeds) else None,
            "x_limit": spread([_figures(by_seed[s][lab])["x_lower_bound"] for s in seeds]),
            "compactions": statistics.median(_figures(by_seed[s][lab])["compressions"] for s in seeds),
            "failed_turns": sum(_figures(by_seed[s][lab])["failed_turns"] for s in seeds),
        }
    return rows


def summary_rows(rows_by_workload: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per label: the median over the workloads of each workload's median ratio to the baseline,
    the worst workload and its ratio, and every workload's ratio; ``floor_median`` and
    ``floor_by_workload`` the same for the floor (``floor_cost``)."""
    out: dict[str, dict[str, Any]] = {}
    labels = list(dict.fromkeys(lab for rows in rows_by_workload.values() for lab in rows))
    for lab in labels:
        ratios = {w: rows[lab]["ratio"][0] for w, rows in rows_by_workload.items()
                  if lab in rows and rows[lab]["ratio"] is not None}
        if not ratios:
            continue
        worst = max(ratios, key=lambda w: ratios[w])
        floors = {w: rows[lab]["floor"][0] for w, rows in rows_by_workload.items()
                  if lab in rows and rows[lab].get("floor") is not None}
        out[lab] = {"median": statistics.median(ratios.values()), "worst": (worst, ratios[worst]), "by_workload": ratios,
                    "floor_median": statistics.median(floors.values()) if floors else None,
                    "floor_by_workload": floors}
    return out


def _fmt(s: Spread | None, digits: int) -> str:
    if s is None:
        return "-"
    return f"{s[0]:.{digits}f} ({s[1]:.{digits}f}-{s[2]:.{digits}f})"


def workload_lines(seed: int, workload: Workload) -> str:
    """What seed ``seed``'s workload is: its random seed, pauses and turn kinds."""
    pauses = [t.pause for t in workload.turns[1:]]
    over5 = sum(1 for p in pauses if p > 300)
    over60 = sum(1 for p in pauses if p > 3600)
    median = statistics.median(pauses) if pauses else 0.0
    kinds: dict[str, int] = {}
    for t in workload.turns:
        kinds[t.kind] = kinds.get(t.kind, 0) + 1
    mix = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
    words = sum(len(t.text.split()) for t in workload.turns)
    return (f"  seed {seed} (random seed {workload.seed}): {over5} of {len(pauses)} pauses > 5 min ({over60} > 1 h), median {median:.0f} s, "
            f"{sum(pauses) / 3600:.1f} h in all; {words:,} words typed; {mix}")


def format_workload(name: str, by_seed: Mapping[int, Mapping[str, Mapping[str, Any]]],
                    loads: Mapping[int, Workload], baseline: str = BASELINE) -> str:
    """One workload's headline table over its seeds."""
    turns = {s: len(w.turns) for s, w in loads.items()}
    rows = workload_rows(by_seed, turns, baseline)
    seeds = sorted(by_seed)
    which = f"seeds {seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"
    lines = [f"{name}: {turns[seeds[0]]} turns on {MODEL}, {which}"]
    lines += [workload_lines(s, loads[s]) for s in seeds]
    head = (f"{'strategy':<22}{'$ / 100 turns':>24}  {'vs ' + baseline:>22}  {'x limit (input)':>19}  "
            f"{'compactions':>11}")
    lines += [head, "-" * len(head)]
    for lab, r in rows.items():
        lines.append(f"{lab:<22}{_fmt(r['per_100'], 4):>24}  {_fmt(r['ratio'], 3):>22}  {_fmt(r['x_limit'], 2):>19}  "
                     f"{r['compactions']:>11g}")
    lines.append("median (min-max) over the seeds; vs = the per-seed ratio of whole bills; x limit = agent input "
                 "cost / its lower bound")
    floors = ", ".join(f"{lab} {_fmt(r['floor'], 3)}" for lab, r in rows.items() if r.get("floor") is not None)
    if floors:
        lines.append(f"floor (the same requests, agent input at its lower bound) vs {baseline}: {floors}")
    lines.append("same requests for every strategy, seed by seed: " + _same_line(by_seed))
    failed = {lab: r["failed_turns"] for lab, r in rows.items() if r["failed_turns"]}
    lines.append("failed turns: " + (", ".join(f"{lab} {n}" for lab, n in failed.items()) if failed else "none"))
    return "\n".join(lines)


def _same_line(by_seed: Mapping[int, Mapping[str, Mapping[str, Any]]]) -> str:
    bad = []
    for s, runs in sorted(by_seed.items()):
        for timed in (False, True):
            group = {lab: r for lab, r in runs.items() if lab.endswith(TIMING_SUFFIX) == timed}
            if not same_requests(group):
                bad.append(f"seed {s}{' with timing' if timed else ''}")
    return "yes" if not bad else "NO (" + ", ".join(bad) + ")"


def format_summary(rows_by_workload: Mapping[str, Mapping[str, Mapping[str, Any]]], baseline: str = BASELINE) -> str:
    """Per strategy: the median over the workloads of its whole-bill ratio to the baseline, the worst
    workload's ratio, and each workload's."""
    summary = summary_rows(rows_by_workload)
    names = list(rows_by_workload)
    head = f"{'strategy':<22}{'median':>8}{'worst':>18}  " + "".join(f"{w:>9}" for w in names)
    lines = [f"summary over {len(names)} workloads: whole bill / {baseline}'s (each workload's median over the "
             "seeds)", head, "-" * len(head)]
    for lab, s in summary.items():
        worst = f"{s['worst'][1]:.3f} {s['worst'][0]}"
        cells = "".join(f"{s['by_workload'][w]:>9.3f}" if w in s["by_workload"] else f"{'-':>9}" for w in names)
        lines.append(f"{lab:<22}{s['median']:>8.3f}{worst:>18}  {cells}")
    lines += ["", f"floor: the whole bill of each strategy's requests with the agent's input at its lower bound, / "
                  f"{baseline}'s: no caching strategy bills those requests lower", head, "-" * len(head)]
    for lab, s in summary.items():
        if s["floor_median"] is None:
            continue
        fl = s["floor_by_workload"]
        worst_w = max(fl, key=lambda w: fl[w])
        cells = "".join(f"{fl[w]:>9.3f}" if w in fl else f"{'-':>9}" for w in names)
        lines.append(f"{lab:<22}{s['floor_median']:>8.3f}{f'{fl[worst_w]:.3f} {worst_w}':>18}  {cells}")
    return "\n".join(lines)
