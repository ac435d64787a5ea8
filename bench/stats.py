"""Summary statistics the benchmarks print: one percentile rule, so their tables agree."""
from __future__ import annotations


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank q-th percentile of ``values`` (any order); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))  # nearest rank
    return ordered[rank - 1]
