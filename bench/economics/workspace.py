"""What every cache-economics workload is made of: the user's turns, the seeded workspace of files
the tool turns read, and the texts of the tool turns ("read ...", "search for ...", "write ... to
...") that the simulator's triggers turn into tool calls (docs/simulator.md, "Its model")."""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class UserTurn:
    text: str
    pause: float  # seconds the user waited before sending it
    kind: str
    phase: str = ""  # the part of the day it belongs to (the ``day`` workload), else ""


@dataclass(frozen=True)
class Workload:
    files: dict[str, str]
    turns: list[UserTurn]
    pattern: str = "steady"
    seed: int | None = None  # the random seed it was built from (None: the pattern's default)


_SYLLABLES = ("ka", "lo", "mi", "ren", "to", "su", "vel", "dra", "pin", "qua", "zor", "bel", "fen", "gus", "hal",
              "jor", "nex", "ost", "pry", "tam", "ul", "wix", "yen", "cro", "dem")
TOPICS = ("budget", "latency", "retry", "cache", "schema", "deadline", "owner", "quota", "region", "token")
TOOL_KINDS = frozenset({"read", "read2", "search", "list", "write"})


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
    """~40 files from 1.5K to 60K characters: Python modules, markdown guides, CSV tables."""
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


def turn_text(rng: random.Random, kind: str, paths: list[str], n: int) -> str:
    """The text of a turn of ``kind`` (a tool kind, ``question`` or ``chat``) as the steady and
    bursty workloads word it; ``n`` is the turn's index (it names a written note)."""
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
