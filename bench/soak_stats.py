"""The tools profile's figures and report (bench/soak.py --profile tools): percentiles of turn
time, each process's memory trend over the second half of the run by least squares, the verdict
on it, and the report's lines.

Pure: the functions take the samples and counters and return numbers and text.

Flat means growing by less than ``FLAT_MB_PER_HOUR`` (10 MB) over an hour, read from the slope of
the least-squares line through the RSS samples of the second half (in the real two-hour run, the
second hour), not from two end points: one sample taken during a burst of allocation moves an end
point by megabytes and the slope hardly at all. The start-to-end difference of the same half is
printed beside it.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench.soak_parts import Counters, Sample, fmt_mb

FLAT_MB_PER_HOUR = 10.0
MIN_POINTS = 3
TRACKED = ("worker", "web")
LABELS = {"worker": "Celery worker", "web": "Daphne", "redis": "Redis", "simulator": "simulator"}


def least_squares_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """The slope of the least-squares line through (x, y) points; None for fewer than two points
    or when every x is the same."""
    n = len(points)
    if n < 2:
        return None
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100): the smallest value with at least q % of the
    values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Trend:
    """One process's RSS over the second half of the run."""

    name: str
    points: int
    minutes: float  # from the half's first sample to its last
    slope_mb_per_hour: float | None
    start_mb: float | None
    end_mb: float | None

    @property
    def change_mb(self) -> float | None:
        return None if self.start_mb is None or self.end_mb is None else self.end_mb - self.start_mb


def second_half(samples: Sequence[Sample]) -> list[Sample]:
    """The samples taken from half of the run's length on."""
    if not samples:
        return []
    half = samples[-1].elapsed / 2
    return [s for s in samples if s.elapsed >= half]


def trend(samples: Sequence[Sample], name: str) -> Trend:
    """RSS in MB against hours over the second half: the least-squares slope, first and last."""
    points = [(s.elapsed / 3600, s.rss_kb[name] / 1024) for s in second_half(samples) if s.rss_kb.get(name)]
    if not points:
        return Trend(name, 0, 0.0, None, None, None)
    return Trend(name, len(points), (points[-1][0] - points[0][0]) * 60, least_squares_slope(points),
                 points[0][1], points[-1][1])


def verdict(t: Trend, limit: float = FLAT_MB_PER_HOUR) -> str:
    """FLAT, GROWING, or TOO FEW SAMPLES (fewer than three in the second half)."""
    if t.points < MIN_POINTS or t.slope_mb_per_hour is None:
        return "TOO FEW SAMPLES"
    return "FLAT" if t.slope_mb_per_hour < limit else "GROWING"


def verdict_line(t: Trend, limit: float = FLAT_MB_PER_HOUR) -> str:
    label = LABELS.get(t.name, t.name)
    word = verdict(t, limit)
    if t.slope_mb_per_hour is None or t.change_mb is None:
        return f"{label} ({t.name}): {word}: no RSS slope ({t.points} samples in the second half)"
    return (f"{label} ({t.name}): {word}: {t.slope_mb_per_hour:+.1f} MB/hour by least squares over the second "
            f"half ({t.points} samples, {t.minutes:.1f} min; flat is under +{limit:g} MB/hour), "
            f"{t.change_mb:+.1f} MB start to end of that half ({t.start_mb:.1f} -> {t.end_mb:.1f} MB)")


def failures(counters: Counters, compaction_failures: int = 0) -> int:
    """Everything that must not happen: a failed turn, a turn without an end, a send answered
    with an error other than a limit's refusal, a failed compaction."""
    return counters.failed + counters.timeouts + counters.post_errors + compaction_failures


def compactions_of(events: Sequence[dict], statuses: tuple[str, ...] = ("compressed",)) -> int:
    return sum(e["n"] for e in events if e["status"] in statuses)


def sample_header(processes: Sequence[str]) -> str:
    return (f"{'minute':>6}  {'turns':>6}  {'refused':>7}  {'compact':>7}  "
            + "  ".join(f"{n + ' MB':>12}" for n in processes))


def sample_row(s: Sample, refused: int, processes: Sequence[str]) -> str:
    compactions = "-" if s.compactions is None else str(s.compactions)
    return (f"{s.elapsed / 60:>6.1f}  {s.turns:>6}  {refused:>7}  {compactions:>7}  "
            + "  ".join(f"{fmt_mb(s.rss_kb.get(n)):>12}" for n in processes))


def report_lines(*, counters: Counters, samples: Sequence[Sample], counts: dict, messages: int) -> list[str]:
    """The report: turns, failures, refusals, compactions, turn times, tool calls, memory."""
    elapsed = samples[-1].elapsed if samples else 0.0
    turns = counters.done + counters.failed
    failed_compactions = compactions_of(counts.get("compressions", ()), ("failed",))
    compactions = compactions_of(counts.get("compressions", ()))
    lines = [
        f"turns: {turns} in {elapsed / 60:.1f} min ({counters.done} done, {counters.failed} failed)",
        f"failures: {failures(counters, failed_compactions)} ({counters.failed} turns failed, {counters.timeouts} "
        f"without an end, {counters.post_errors} sends answered with an error, {failed_compactions} compactions "
        f"failed); {counters.dropped_sockets} sockets dropped, {messages} socket messages",
        f"refusals (per-user limits, expected): {counters.refused} "
        + "(" + ", ".join(f"{name} {n}" for name, n in sorted(counters.refused_by_user.items())) + ")",
        f"compactions: {compactions} "
        + "(" + ", ".join(f"{e['trigger']} {e['n']}" for e in sorted(counts.get("compressions", ()),
                                                                      key=lambda e: e["trigger"])
                          if e["status"] == "compressed") + ")",
    ]
    p50, p95 = percentile(counters.turn_seconds, 50), percentile(counters.turn_seconds, 95)
    if p50 is not None and p95 is not None:
        lines.append(f"turn time (send -> finished on the socket): p50 {p50:.2f} s, p95 {p95:.2f} s, "
                     f"max {max(counters.turn_seconds):.2f} s")
    tools = counts.get("tools", {})
    if tools:
        lines.append("tool calls: " + ", ".join(
            f"{name} {t['calls']}" + (f" ({t['errors']} errors)" if t["errors"] else "")
            for name, t in sorted(tools.items())))
    recall = {name: tools.get(name, {}).get("calls", 0) for name in ("context_search", "context_expand")}
    lines.append(f"search and expand calls: context_search {recall['context_search']}, "
                 f"context_expand {recall['context_expand']}")
    if counters.steps:
        lines.append("turns by step: " + ", ".join(f"{k} {v}" for k, v in counters.steps.items()))
    for name in TRACKED:
        lines.append(verdict_line(trend(samples, name)))
    for error in counters.errors[:5]:
        lines.append(f"  {error}")
    return lines
