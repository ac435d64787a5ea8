"""The cache-economics benchmark's workloads: a seeded workspace of files and the user's turns,
with the pauses between them drawn from one of two patterns (``steady``, ``bursty``)."""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

SEED = 20261130
DEFAULT_TURNS = 160
MODEL = "sim-claude-200k"


@dataclass(frozen=True)
class UserTurn:
    text: str
    pause: float  # seconds the user waited before sending it
    kind: str


@dataclass(frozen=True)
class Workload:
    files: dict[str, str]
    turns: list[UserTurn]
    pattern: str = "steady"


_SYLLABLES = ("ka", "lo", "mi", "ren", "to", "su", "vel", "dra", "pin", "qua", "zor", "bel", "fen", "gus", "hal",
              "jor", "nex", "ost", "pry", "tam", "ul", "wix", "yen", "cro", "dem")
TOPICS = ("budget", "latency", "retry", "cache", "schema", "deadline", "owner", "quota", "region", "token")


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3)))


def _sentence(rng: random.Random, lo: int = 6, hi: int = 16) -> str:
    words = [_word(rng) for _ in range(rng.randint(lo, hi))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), rng.choice(TOPICS))
    if rng.random() < 0.2:
        words.append(str(rng.randint(2, 9999)))
    return " ".join(words)


def _file_text(rng: random.Random, kind: str, chars: int) -> str:
    lines: list[str] = []
    total = 0
    n = 0
    while total < chars:
        n += 1
        if kind == "py":
            line = rng.choice((
                f"def {_word(rng)}_{n}({_word(rng)}, {_word(rng)}=None):",
                f"    {_word(rng)} = {_word(rng)}.{_word(rng)}({rng.randint(0, 500)})  # {_sentence(rng, 3, 8)}",
                f"    return {_word(rng)}_{rng.choice(TOPICS)}",
                f"# TODO {_sentence(rng, 4, 10)}",
            ))
        elif kind == "md":
            line = rng.choice((f"## {_sentence(rng, 2, 5)}", _sentence(rng, 10, 24) + ".", f"- {_sentence(rng, 4, 10)}"))
        else:
            line = ",".join([str(n), _word(rng), rng.choice(TOPICS), str(rng.randint(0, 10**6)), _word(rng)])
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines) + "\n"


def build_workspace(rng: random.Random) -> dict[str, str]:
    sizes = (1_500, 4_000, 8_000, 15_000, 30_000, 60_000)
    files: dict[str, str] = {}
    for i in range(18):
        files[f"src/module_{i:02d}.py"] = _file_text(rng, "py", rng.choice(sizes))
    for i in range(12):
        files[f"docs/guide_{i:02d}.md"] = _file_text(rng, "md", rng.choice(sizes))
    for i in range(8):
        files[f"data/table_{i:02d}.csv"] = _file_text(rng, "csv", rng.choice(sizes))
    files["README.md"] = "# Project\n" + _file_text(rng, "md", 2_000)
    return files


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
SEEDS = {"steady": SEED, "bursty": 20261207}


_TURN_KINDS = (("read", 40), ("read2", 8), ("search", 12), ("list", 6), ("write", 8), ("question", 12), ("chat", 14))


def _turn_text(rng: random.Random, kind: str, paths: list[str], n: int) -> str:
    if kind == "read":
        return f"read {rng.choice(paths)}"
    if kind == "read2":
        a, b = rng.sample(paths, 2)
        return f"read {a} and read {b}"
    if kind == "search":
        where = rng.choice(("src", "docs", "data", "."))
        return f"search for {rng.choice(TOPICS)} in {where}"
    if kind == "list":
        return rng.choice(("list files", "list files in src", "list files in docs"))
    if kind == "write":
        return f"write `{_sentence(rng, 4, 12)}` to notes/note_{n:03d}.txt"
    if kind == "question":
        return f"what was the {rng.choice(TOPICS)} of {_word(rng)}?"
    return f"thanks. {_sentence(rng, 6, 20)}. reply with {rng.choice((40, 80, 150))} words"


def build_workload(turns: int = DEFAULT_TURNS, seed: int | None = None, pattern: str = "steady") -> Workload:
    """The seeded workload of a pause pattern (``PAUSE_PATTERNS``; its own seed unless given)."""
    pause_of = PAUSE_PATTERNS[pattern]
    rng = random.Random(SEEDS[pattern] if seed is None else seed)
    files = build_workspace(rng)
    paths = sorted(files)
    kinds = [k for k, _ in _TURN_KINDS]
    weights = [w for _, w in _TURN_KINDS]
    out: list[UserTurn] = []
    for n in range(turns):
        kind = "read" if n == 0 else rng.choices(kinds, weights)[0]
        pause = 0.0 if n == 0 else pause_of(rng)
        out.append(UserTurn(_turn_text(rng, kind, paths, n), round(pause, 1), kind))
    return Workload(files, out, pattern)
