"""The independent recall exam of ``bench/exam_independent/`` (written without sight of the engine),
loaded as it is: one JSON file per conversation, its items in the exam's order and the facts they
plant. Nothing here changes with a seed, and nothing touches Django or a database.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

EXAM_DIR = Path(__file__).resolve().parent / "exam_independent"
CONVERSATIONS = ("ops", "research", "trip")


@dataclass(frozen=True)
class Item:
    id: str
    kind: str  # "note" or "file"
    text: str
    path: str = ""


@dataclass(frozen=True)
class Fact:
    id: str
    item: str
    answer: str
    kind: str
    q_subject: str
    q_other: str


@dataclass(frozen=True)
class Exam:
    shape: str
    items: tuple[Item, ...]
    facts: tuple[Fact, ...]

    @property
    def answers(self) -> tuple[str, ...]:
        return tuple(f.answer for f in self.facts)


def load_exam(shape: str) -> Exam:
    data = json.loads((EXAM_DIR / f"{shape}.json").read_text(encoding="utf-8"))
    items = tuple(Item(i["id"], i["kind"], i["text"], i.get("path", "")) for i in data["items"])
    facts = tuple(Fact(f["id"], f["item"], f["answer"], f["kind"], f["q_subject"], f["q_other"])
                  for f in data["facts"])
    return Exam(data["shape"], items, facts)


def all_answers() -> tuple[str, ...]:
    """Every answer of every exam conversation: padding holds none of them."""
    return tuple(a for shape in CONVERSATIONS for a in load_exam(shape).answers)
