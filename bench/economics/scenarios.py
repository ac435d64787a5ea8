"""The cache-economics workloads beside ``steady`` and ``bursty``: each a seeded list of user turns
over the same kind of workspace, with its own mix of turn kinds and its own pauses. The mixes
follow what people do in each situation:

- ``chat``: someone thinking a problem through with the assistant, no tools at all. A third of the
  messages are new questions with their context, a third follow-ups on the last answer, a fifth
  pasted material (an email, notes, a log, code, a table, a draft) to discuss, the rest recall
  questions and short thanks. Long messages take long to write, so a pause is reading-and-thinking
  time (log-normal around 40 s) plus typing time (40 words a minute; a paste 15-90 s), with 8 % of
  breaks of 20 min to 3 h.
- ``rapid``: a focused session at the keyboard: about two thirds tool work (reads, searches,
  writes) with quick acknowledgements, short questions and follow-ups in between. Every pause is
  under 5 minutes: 78 % log-normal around 22 s, 22 % around 100 s (reading a long answer), cut at
  295 s.
- ``sparse``: someone who drops in a few times a day: mostly a question with its context, a
  follow-up or a recall of what was said days before; two turns in five check or change a file.
  65 % of pauses (rounded up) are 1 h to a day (70 % 1-6 h, 30 % overnight, 12-24 h), at seeded
  positions; the rest are a quick follow-up inside a visit (60 %, around 45 s) or a return after a
  meeting (40 %, 6-50 min).
- ``day``: a working day. A morning burst (35 % of the turns) of questions and planning, with
  quick looks at files (three turns in ten), pauses around 18 s; a lunch break of 45-90 min; an
  afternoon of tool work (three turns in four read, write or search; pauses around 70 s, 4 % of
  10-25 min breaks); a break of 3-6 h; an evening return of a few turns (3-6; fewer in a short
  replay) recalling the day's facts, pauses around 50 s.

Tool turns are worded as the steady workload words them ("read src/module_03.py"), sometimes with
a clause after ("... and tell me what it does"); a ``question`` asks about the workspace's contents
as there, a ``recall`` about a fact an earlier message stated; the other texts come from
``texts.ChatWriter``. The first turn is never a follow-up, an acknowledgement or a question.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable

from bench.economics.texts import ChatWriter
from bench.economics.workspace import TOOL_KINDS, UserTurn, Workload, build_workspace, turn_text

Mix = tuple[tuple[str, int], ...]
CHAT_MIX: Mix = (("ask", 32), ("paste", 20), ("follow_up", 33), ("recall", 10), ("ack", 5))
RAPID_MIX: Mix = (("read", 26), ("read2", 6), ("search", 14), ("list", 4), ("write", 14), ("question", 6),
                  ("ack", 14), ("ask", 8), ("follow_up", 8))
SPARSE_MIX: Mix = (("ask", 22), ("paste", 8), ("follow_up", 12), ("recall", 12), ("read", 18), ("read2", 3),
                   ("search", 9), ("write", 8), ("list", 2), ("question", 6))
DAY_MIXES: dict[str, Mix] = {
    "morning": (("ask", 22), ("follow_up", 20), ("recall", 8), ("ack", 14), ("read", 16), ("search", 8),
                ("list", 6), ("paste", 6)),
    "afternoon": (("read", 30), ("read2", 8), ("search", 16), ("list", 5), ("write", 17), ("question", 6),
                  ("ack", 10), ("follow_up", 8)),
    "evening": (("recall", 30), ("follow_up", 25), ("ask", 20), ("read", 15), ("question", 10)),
}
NOT_FIRST = frozenset({"follow_up", "recall", "ack", "question"})
CHAT_TYPING_WPM = 40
RAPID_MAX_PAUSE = 295.0
SPARSE_LONG_SHARE = 0.65
HOUR = 3600.0


def _kind(rng: random.Random, mix: Mix, first: bool) -> str:
    kinds = [k for k, _ in mix if not (first and k in NOT_FIRST)]
    weights = [w for k, w in mix if not (first and k in NOT_FIRST)]
    return rng.choices(kinds, weights)[0]


def _text(rng: random.Random, writer: ChatWriter, kind: str, paths: list[str], n: int) -> str:
    if kind in TOOL_KINDS or kind == "question":
        text = turn_text(rng, kind, paths, n)
        tail = {"read": "read", "read2": "read", "search": "search"}.get(kind)
        return text + writer.tool_tail(tail) if tail else text
    return getattr(writer, {"recall": "question"}.get(kind, kind))()


def _clamped_lognormal(rng: random.Random, median: float, sigma: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, rng.lognormvariate(math.log(median), sigma)))


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _turns(rng: random.Random, writer: ChatWriter, paths: list[str], mixes: list[Mix], pauses: list[float],
           phases: list[str] | None = None) -> list[UserTurn]:
    """Turn n of kind drawn from ``mixes[n]`` after ``pauses[n]`` seconds (the first: 0)."""
    out = []
    for n, (mix, pause) in enumerate(zip(mixes, pauses)):
        kind = _kind(rng, mix, first=n == 0)
        out.append(UserTurn(_text(rng, writer, kind, paths, n), round(0.0 if n == 0 else pause, 1), kind,
                            phases[n] if phases else ""))
    return out


def chat_turns(rng: random.Random, writer: ChatWriter, paths: list[str], turns: int) -> list[UserTurn]:
    out = []
    for n in range(turns):
        kind = _kind(rng, CHAT_MIX, first=n == 0)
        text = _text(rng, writer, kind, paths, n)
        if n == 0:
            pause = 0.0
        elif rng.random() < 0.08:
            pause = _log_uniform(rng, 20 * 60.0, 3 * HOUR)
        else:
            typing = rng.uniform(15.0, 90.0) if kind == "paste" else len(text.split()) * 60.0 / CHAT_TYPING_WPM
            pause = _clamped_lognormal(rng, 40.0, 0.8, 5.0, 600.0) + min(typing, 900.0)
        out.append(UserTurn(text, round(pause, 1), kind))
    return out


def rapid_pause(rng: random.Random) -> float:
    if rng.random() < 0.78:
        return _clamped_lognormal(rng, 22.0, 0.7, 3.0, RAPID_MAX_PAUSE)
    return _clamped_lognormal(rng, 100.0, 0.45, 30.0, RAPID_MAX_PAUSE)


def rapid_turns(rng: random.Random, writer: ChatWriter, paths: list[str], turns: int) -> list[UserTurn]:
    pauses = [rapid_pause(rng) for _ in range(turns)]
    return _turns(rng, writer, paths, [RAPID_MIX] * turns, pauses)


def sparse_pauses(rng: random.Random, turns: int) -> list[float]:
    """``turns`` pauses, the first unused; of the other ``turns - 1``, ceil(65 %) are long."""
    count = max(0, turns - 1)
    long_at = set(rng.sample(range(count), math.ceil(SPARSE_LONG_SHARE * count)))
    out = [0.0]
    for i in range(count):
        if i in long_at:
            out.append(rng.uniform(12 * HOUR, 24 * HOUR) if rng.random() < 0.3 else _log_uniform(rng, HOUR, 6 * HOUR))
        elif rng.random() < 0.6:
            out.append(_clamped_lognormal(rng, 45.0, 0.8, 5.0, 290.0))
        else:
            out.append(_log_uniform(rng, 6 * 60.0, 50 * 60.0))
    return out[:turns]


def sparse_turns(rng: random.Random, writer: ChatWriter, paths: list[str], turns: int) -> list[UserTurn]:
    return _turns(rng, writer, paths, [SPARSE_MIX] * turns, sparse_pauses(rng, turns))


def day_phases(rng: random.Random, turns: int) -> list[str]:
    """Morning, afternoon and evening turn counts (each at least one from three turns on)."""
    evening = rng.randint(3, 6) if turns >= 20 else max(1, turns // 6)
    morning = max(1, round(turns * 0.35))
    afternoon = max(1, turns - morning - evening)
    evening = max(0, turns - morning - afternoon)
    return (["morning"] * morning + ["afternoon"] * afternoon + ["evening"] * evening)[:turns]


def day_turns(rng: random.Random, writer: ChatWriter, paths: list[str], turns: int) -> list[UserTurn]:
    phases = day_phases(rng, turns)
    pauses = []
    for n, phase in enumerate(phases):
        starts = n > 0 and phases[n - 1] != phase
        if phase == "morning":
            pauses.append(_clamped_lognormal(rng, 18.0, 0.8, 3.0, 240.0))
        elif phase == "afternoon" and starts:
            pauses.append(rng.uniform(45 * 60.0, 90 * 60.0))  # lunch
        elif phase == "afternoon":
            pauses.append(rng.uniform(600.0, 1_500.0) if rng.random() < 0.04
                          else _clamped_lognormal(rng, 70.0, 0.55, 15.0, 480.0))
        elif starts:
            pauses.append(rng.uniform(3 * HOUR, 6 * HOUR))  # the long break before the evening
        else:
            pauses.append(_clamped_lognormal(rng, 50.0, 0.7, 8.0, 420.0))
    return _turns(rng, writer, paths, [DAY_MIXES[p] for p in phases], pauses, phases)


SCENARIOS: dict[str, Callable[[random.Random, ChatWriter, list[str], int], list[UserTurn]]] = {
    "chat": chat_turns, "rapid": rapid_turns, "sparse": sparse_turns, "day": day_turns,
}


def build_scenario(name: str, turns: int, seed: int) -> Workload:
    """The workload ``name`` of ``SCENARIOS`` with ``turns`` turns from ``seed``: the workspace
    first, then the turns (their kinds, texts and pauses)."""
    rng = random.Random(seed)
    files = build_workspace(rng)
    writer = ChatWriter(rng)
    return Workload(files, SCENARIOS[name](rng, writer, sorted(files), turns), name, seed)
