"""The independent exam's table: the runs pooled per conversation and engine (and "all" pooled over
the conversations), each figure as the median and min–max over the seeds, then the lcm targets and
lcm's closed-book misses per kind of fact. An engine played with cache-aware compaction timing is
a row of its own (``lcm+timing``), after the engine; when both were played, the recall with and
without the timing is compared per engine (median over the seeds, and per seed). Printing only:
the same runs give the same table.
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.independent_exam import CONVERSATIONS
from bench.independent_scoring import Run
from bench.independent_timing import base_engine, engine_order, label

ENGINES = ("compressor", "lcm")  # the engines played, in the table's order
MIN_COMPACTIONS = 3
TARGETS = {"closed": 0.70, "open_subject": 0.95, "context_share": 0.25}


def _rate(hits: Sequence[bool]) -> float:
    return sum(hits) / len(hits) if hits else 0.0


@dataclass(frozen=True)
class Row:
    """One table row: per seed, the figures of one engine on one conversation (or all pooled)."""
    conversation: str
    engine: str
    facts: int
    closed: list[float]
    open_subject: list[float]
    open_other: list[float]
    searched: bool
    share: list[float]
    context_tokens: list[float]
    uncompacted_tokens: list[float]
    compactions: list[float]
    anchors: list[float]
    fact_bearing: list[float | None]
    exam_value: list[float | None]


def _pool(conversation: str, engine: str, runs: Sequence[Run]) -> Row:
    by_seed: dict[int, list[Run]] = {}
    for r in runs:
        by_seed.setdefault(r.seed, []).append(r)
    groups = [by_seed[s] for s in sorted(by_seed)]

    def rate(group: list[Run], attr: str) -> float:
        return _rate([h for r in group for h in getattr(r, attr)])

    def share(group: list[Run], attr: str) -> float | None:
        n = sum(r.anchors for r in group)
        return sum(getattr(r, attr) for r in group) / n if n else None

    return Row(conversation, engine, sum(len(r.closed) for r in groups[0]) if groups else 0,
               [rate(g, "closed") for g in groups], [rate(g, "open_subject") for g in groups],
               [rate(g, "open_other") for g in groups], all(r.searched for r in runs),
               [sum(r.context_tokens for r in g) / sum(r.uncompacted_tokens for r in g) for g in groups],
               [sum(r.context_tokens for r in g) for g in groups], [sum(r.uncompacted_tokens for r in g) for g in groups],
               [min(r.compactions for r in g) for g in groups], [sum(r.anchors for r in g) for g in groups],
               [share(g, "fact_bearing") for g in groups], [share(g, "exam_value") for g in groups])


def _engines(runs: Sequence[Run]) -> list[str]:
    """The engine labels played, in the table's order (each engine, then its ``+timing`` run)."""
    return [e for e in engine_order(ENGINES) if any(r.engine == e for r in runs)]


def rows(runs: Sequence[Run]) -> list[Row]:
    out = []
    shapes = [s for s in CONVERSATIONS if any(r.shape == s for r in runs)]
    engines = _engines(runs)
    for shape in shapes:
        for engine in engines:
            mine = [r for r in runs if r.shape == shape and r.engine == engine]
            if mine:
                out.append(_pool(shape, engine, mine))
    if len(shapes) > 1:
        for engine in engines:
            mine = [r for r in runs if r.engine == engine]
            if mine:
                out.append(_pool("all", engine, mine))
    return out


def _spread(values: Sequence[float | None], fmt: Callable[[float], str]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "—"
    mid = statistics.median(known)
    if len(known) == 1 or min(known) == max(known):
        return fmt(mid)
    return f"{fmt(mid)} ({fmt(min(known))}–{fmt(max(known))})"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}"


def _num(v: float) -> str:
    return f"{v:,.0f}"


def _miss_kinds(runs: Sequence[Run]) -> None:
    kinds: dict[str, Counter] = {}
    for r in runs:
        for kind, cause in zip(r.kinds, r.causes):
            count = kinds.setdefault(kind, Counter())
            count["facts"] += 1
            if cause:
                count["misses"] += 1
                count[cause] += 1
    causes = ("not extracted", "other ref", "dropped")
    head = f"  {'kind':<17} {'facts':>5} {'misses':>6}  " + "  ".join(f"{c:>13}" for c in causes)
    print(head)
    for kind, count in sorted(kinds.items(), key=lambda kv: (-kv[1]["misses"], kv[0])):
        print(f"  {kind:<17} {count['facts']:>5} {count['misses']:>6}  "
              + "  ".join(f"{count[c]:>13}" for c in causes))


def _change(without: float, with_: float) -> str:
    return f"{_pct(without)} → {_pct(with_)} ({100 * (with_ - without):+.1f})"


def timing_lines(runs: Sequence[Run], idle: Mapping[tuple[str, str, int], int] | None = None) -> list[str]:
    """Per engine played both ways: closed-book and open-book recall (each seed's facts pooled
    over the conversations) without → with the timing, the median over the seeds and each seed,
    and the idle compactions of the timed runs."""
    out = []
    for engine in ENGINES:
        plain = [r for r in runs if r.engine == engine]
        timed = [r for r in runs if r.engine == label(engine, True)]
        seeds = sorted({r.seed for r in plain} & {r.seed for r in timed})
        if not seeds:
            continue
        a = _pool("all", engine, [r for r in plain if r.seed in seeds])
        b = _pool("all", label(engine, True), [r for r in timed if r.seed in seeds])
        figures = [("closed-book", a.closed, b.closed)]
        if a.searched and b.searched:
            figures += [("open (subject)", a.open_subject, b.open_subject), ("open (other)", a.open_other, b.open_other)]
        out.append(f"{engine} → {b.engine}, median over the seeds: " + "; ".join(
            f"{name} {_change(statistics.median(x), statistics.median(y))}" for name, x, y in figures))
        for i, seed in enumerate(seeds):
            out.append(f"  seed {seed}: " + "; ".join(f"{name} {_change(x[i], y[i])}" for name, x, y in figures))
        if idle is not None:
            counts = [sum(n for (_, e, s), n in idle.items() if e == b.engine and s == seed) for seed in seeds]
            out.append(f"  idle compactions of {b.engine} (all conversations), per seed: "
                       + ", ".join(f"seed {seed}: {n}" for seed, n in zip(seeds, counts)))
    return out


def print_table(runs: Sequence[Run], *, idle: Mapping[tuple[str, str, int], int] | None = None,
                pauses: Sequence[str] = ()) -> None:
    """``idle``: the idle compactions per (conversation, engine label, seed); ``pauses``: lines on
    the pauses played between the turns (none: the turns follow each other at once)."""
    seeds = sorted({r.seed for r in runs})
    print(f"\nIndependent exam after compaction — real agent loop on the simulator's 64k model, seeds "
          f"{' '.join(map(str, seeds))}: median (min–max) over the seeds; scores and shares in %")
    for line in pauses:
        print(line)
    head = (f"{'conversation':<12} {'engine':<18} {'facts':>5}  {'closed-book':<18}{'open (subject)':<18}"
            f"{'open (other)':<18}{'context share':<18}{'tokens: context / uncompacted':<31}{'compactions':<12}"
            f"{'anchors':<15}{'fact-bearing':<18}exam-value")
    print(head)
    print("-" * len(head))
    for row in rows(runs):
        opened = (lambda v: _spread(v, _pct)) if row.searched else (lambda v: "—")
        tokens = f"{_num(statistics.median(row.context_tokens))} / {_num(statistics.median(row.uncompacted_tokens))}"
        print(f"{row.conversation:<12} {row.engine:<18} {row.facts:>5}  {_spread(row.closed, _pct):<18}"
              f"{opened(row.open_subject):<18}{opened(row.open_other):<18}{_spread(row.share, _pct):<18}"
              f"{tokens:<31}{_spread(row.compactions, _num):<12}{_spread(row.anchors, _num):<15}"
              f"{_spread(row.fact_bearing, _pct):<18}{_spread(row.exam_value, _pct)}")
    print("closed-book: the planting message live, or an anchor holding the answer with that message's reference;\n"
          "open: closed-book, or one context_search of the question (subject words / other words) returns the\n"
          "planting message ('—': the engine offers no context_search); tokens: medians of the next request and of\n"
          "the uncompacted conversation; 'all': each seed's facts pooled over the conversations, tokens summed,\n"
          "the fewest compactions of a conversation; fact-bearing, exam-value: the anchors overlapping an answer,\n"
          "appearing in an exam item (lower bounds of the anchors' precision)")
    for r in runs:
        if r.unplanted or r.failed_turns:
            print(f"WARNING: {r.shape}/{r.engine}/seed {r.seed}: {r.failed_turns} failed turns; planting message "
                  f"without its answer: {', '.join(r.unplanted) or 'none'}")
    compared = timing_lines(runs, idle)
    if compared:
        print("\nCache-aware compaction timing, recall without → with it (each seed's facts pooled over the "
              "conversations; in %, the change in points):")
        for line in compared:
            print(line)
    for engine in _engines(runs):
        if base_engine(engine) == "lcm":
            _lcm_report(engine, [r for r in runs if r.engine == engine])


def _lcm_report(engine: str, lcm: Sequence[Run]) -> None:
    """The lcm targets, its compactions and its closed-book misses per kind of fact."""
    pooled = _pool("all", engine, lcm)
    print()
    for name, value, target, at_most in (
            ("closed-book", statistics.median(pooled.closed), TARGETS["closed"], False),
            ("open-book (subject words)", statistics.median(pooled.open_subject), TARGETS["open_subject"], False),
            ("context share of the uncompacted tokens", max(r.share for r in lcm), TARGETS["context_share"], True)):
        met = value <= target if at_most else value >= target
        print(f"Target {engine} {name} {'≤' if at_most else '≥'} {target:.0%}: {'met' if met else 'NOT met'} "
              f"({value:.1%}, {'the largest share of any run' if at_most else 'the median over the seeds'})")
    fewest = min(r.compactions for r in lcm)
    print(f"Compactions of every {engine} run: {fewest} at least "
          f"({'the' if fewest >= MIN_COMPACTIONS else 'fewer than the'} {MIN_COMPACTIONS} the exam is sized for)")
    if any(r.indexed for r in lcm):
        print(f"\n{engine} closed-book misses per kind of fact (all conversations and seeds). not extracted:\n"
              "the extractor takes no value holding the answer from the planting message; other ref: the index\n"
              "holds the answer only under another message's reference; dropped: extracted, not in the final index")
        _miss_kinds([r for r in lcm if r.indexed])
