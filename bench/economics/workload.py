"""The cache-economics benchmark's workloads: a seeded workspace of files and the user's turns.
``steady`` and ``bursty`` draw tool-heavy turns and their pauses from one of two patterns (below);
``chat``, ``rapid``, ``sparse`` and ``day`` are built by ``scenarios`` (its docstring gives their
mixes and pauses). ``make_workload(name, seed, turns)`` is the benchmark's entry: seed 1 is the
workload's own seed (``SEEDS``), seed k its own seed + k - 1, so seed 1 of steady and bursty is
the workload the benchmark has always replayed."""
from __future__ import annotations

import math
import random
from collections.abc import Callable

from bench.economics.scenarios import SCENARIOS, build_scenario
from bench.economics.workspace import UserTurn, Workload, build_workspace, turn_text

SEED = 20261130
DEFAULT_TURNS = 160
MODEL = "sim-claude-200k"


def sample_pause(rng: random.Random) -> float:
    """The ``steady`` pattern's seconds between turns: mostly a quick follow-up, sometimes a break."""
    u = rng.random()
    if u < 0.80:
        return min(90.0, max(5.0, rng.lognormvariate(math.log(25.0), 0.7)))
    if u < 0.96:
        return math.exp(rng.uniform(math.log(120.0), math.log(900.0)))
    if u < 0.99:
        return rng.uniform(1_200.0, 3_000.0)
    return rng.uniform(3_600.0, 7_200.0)


def sample_bursty_pause(rng: random.Random) -> float:
    """The ``bursty`` pattern: bursts of quick turns (84 %, log-normal around 12 s, 3–60 s) cut by
    breaks: 4 % 5.5–10 min, 7.2 % 12–55 min, 4.8 % 65 min–3 h."""
    if rng.random() < 0.84:
        return min(60.0, max(3.0, rng.lognormvariate(math.log(12.0), 0.6)))
    u = rng.random()
    if u < 0.25:
        return rng.uniform(330.0, 600.0)
    if u < 0.70:
        return rng.uniform(720.0, 3_300.0)
    return rng.uniform(3_900.0, 10_800.0)


PAUSE_PATTERNS: dict[str, Callable[[random.Random], float]] = {"steady": sample_pause, "bursty": sample_bursty_pause}
SEEDS = {"steady": SEED, "bursty": 20261207, "chat": 20261214, "rapid": 20261221, "sparse": 20261228,
         "day": 20270104}
WORKLOADS = (*PAUSE_PATTERNS, *SCENARIOS)

_TURN_KINDS = (("read", 40), ("read2", 8), ("search", 12), ("list", 6), ("write", 8), ("question", 12), ("chat", 14))


def build_workload(turns: int = DEFAULT_TURNS, seed: int | None = None, pattern: str = "steady") -> Workload:
    """The seeded workload ``pattern`` (one of ``WORKLOADS``; its own seed unless given)."""
    seed = SEEDS[pattern] if seed is None else seed
    if pattern in SCENARIOS:
        return build_scenario(pattern, turns, seed)
    pause_of = PAUSE_PATTERNS[pattern]
    rng = random.Random(seed)
    files = build_workspace(rng)
    paths = sorted(files)
    kinds = [k for k, _ in _TURN_KINDS]
    weights = [w for _, w in _TURN_KINDS]
    out: list[UserTurn] = []
    for n in range(turns):
        kind = "read" if n == 0 else rng.choices(kinds, weights)[0]
        pause = 0.0 if n == 0 else pause_of(rng)
        out.append(UserTurn(turn_text(rng, kind, paths, n), round(pause, 1), kind))
    return Workload(files, out, pattern, seed)


def workload_seed(name: str, seed: int = 1) -> int:
    """The random seed of the benchmark's seed ``seed`` (1, 2, ...) of workload ``name``."""
    return SEEDS[name] + seed - 1


def make_workload(name: str, seed: int = 1, turns: int = DEFAULT_TURNS) -> Workload:
    """Workload ``name`` at the benchmark's seed ``seed`` (1 is the workload's own seed)."""
    return build_workload(turns, seed=workload_seed(name, seed), pattern=name)
