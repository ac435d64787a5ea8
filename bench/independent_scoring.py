"""The independent exam's scoring, pure (no Django, no database): closed-book and open-book on the
planting message's reference, anchor precision, the cause of a closed-book miss, and ``Run``, the
scores of one conversation played with one engine and one seed.

Guarantees: a hit needs the planting message itself, live in the next request or as the reference
of an anchor holding the answer, or as a search result's ``ref``; the answer in any other message,
or in a summary's prose, never counts. Every comparison is case-insensitive. The rules are spelled
out in the docstring of ``bench/fidelity_independent.py``.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compression.core.anchors import Anchor, parse_index
from compression.core.lcm import split_lcm_body


@dataclass(frozen=True)
class Context:
    """What the next request holds, by reference: the text of each live message that is not a
    summary, and the anchor index of the summary."""
    live: Mapping[str, str]
    anchors: tuple[Anchor, ...] = ()


def summary_anchors(body: str) -> list[Anchor]:
    """The anchor index of a summary body (any engine's); never its prose."""
    return parse_index(split_lcm_body(body)[1])


def closed_book(answer: str, ref: str, context: Context) -> bool:
    """The planting message ``ref`` is live and holds ``answer``, or an anchor of ``ref`` does."""
    low = answer.lower()
    if low in context.live.get(ref, "").lower():
        return True
    return any(a.ref == ref and low in a.value.lower() for a in context.anchors)


def open_book(answer: str, ref: str, planting_text: str, context: Context, results: Iterable[Mapping[str, Any]]) -> bool:
    """Closed-book, or a search result of ``ref`` whose snippet or message holds ``answer``."""
    if closed_book(answer, ref, context):
        return True
    low = answer.lower()
    return any(r.get("ref") == ref and (low in str(r.get("snippet") or "").lower() or low in planting_text.lower())
               for r in results)


def _words4(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) >= 4}


def overlaps(value: str, answer: str) -> bool:
    """One contains the other (case-insensitive), or they share a word of four characters or more."""
    v, a = value.lower(), answer.lower()
    return a in v or v in a or bool(_words4(v) & _words4(a))


def anchor_precision(anchors: Sequence[Anchor], answers: Sequence[str], item_texts: Sequence[str]) -> tuple[int, int]:
    """(fact-bearing anchors, exam-value anchors) among ``anchors``."""
    texts = [t.lower() for t in item_texts]
    bearing = sum(any(overlaps(a.value, ans) for ans in answers) for a in anchors)
    exam_value = sum(any(a.value.lower() in t for t in texts) for a in anchors)
    return bearing, exam_value


def miss_cause(answer: str, ref: str, anchors: Sequence[Anchor], extracted: Sequence[Anchor]) -> str:
    """Why an engine with an anchor index missed a fact closed-book (see ``bench/fidelity_independent.py``)."""
    low = answer.lower()
    if not any(low in a.value.lower() for a in extracted):
        return "not extracted"
    if any(low in a.value.lower() for a in anchors):
        return "other ref"
    return "dropped"



@dataclass
class Run:
    """One conversation played with one engine and one seed; the lists run over the exam's facts."""
    shape: str
    engine: str
    seed: int
    searched: bool  # the engine offers context_search
    turns: int
    failed_turns: int
    compactions: int
    context_tokens: int
    uncompacted_tokens: int
    anchors: int  # lines of the final summary's anchor index
    indexed: bool  # the final summary has an anchor index
    fact_bearing: int = 0
    exam_value: int = 0
    seconds: float = 0.0
    facts: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    closed: list[bool] = field(default_factory=list)
    open_subject: list[bool] = field(default_factory=list)
    open_other: list[bool] = field(default_factory=list)
    live: list[bool] = field(default_factory=list)  # the planting message is live in the next request
    causes: list[str] = field(default_factory=list)  # "" for a closed-book hit, else the miss's cause
    unplanted: list[str] = field(default_factory=list)  # facts whose planting message lacks the answer

    @property
    def share(self) -> float:
        return self.context_tokens / self.uncompacted_tokens if self.uncompacted_tokens else 0.0
