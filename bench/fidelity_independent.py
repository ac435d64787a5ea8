"""The independent recall exam (``bench/exam_independent/``, written without sight of the engine)
played through the real agent loop, per context engine, and scored on what points to the message
that planted each fact.

Playing. Each exam item, in the exam's order, becomes one user turn: a ``note`` is sent as the
user's message; a ``file`` is written into the conversation's workspace at its ``path`` and the
user asks the agent to read it, so its text arrives as the ``read_file`` tool result. Between
items come seeded padding turns (work chat, some asking for a long reply, and reads of generated
workspace files) full of look-alike values (other hosts, ports, cities, amounts, names, dates),
none holding any answer of the exam (checked, case-insensitive), until the conversation is about
``PADDING.target_tokens`` long: at least three compactions on the simulator's 64k model (Celery
eager, SQLite). A seed changes the padding only; the items and their order never change.

Scoring, per fact, per engine, per seed. The planting message is the stored ``Message`` of the
note, or the tool result that carried the file; its reference is ``m<id>``.

- closed-book (the same for both questions): the planting message is still live in the next
  request and holds the answer there (a tool result pruned to a stub does not), or a line of the
  summary's anchor index holds the answer (case-insensitive) and carries the planting message's
  reference. The summary's prose never counts, nor does the answer in any other message (an
  echo in a reply, a tool report);
- open-book, per question (``q_subject``: the planting text's subject words; ``q_other``: other
  words): closed-book, or one ``context_search`` with the question as query (through the
  engine's ``handle_tool_call``, limit 5) returns a result whose ``ref`` is the planting message
  and whose snippet, or whose message, holds the answer. Run for every engine whose
  ``get_tool_schemas()`` offers ``context_search``;
- anchor precision, for every summary with an anchor index: the anchors counted, the
  fact-bearing share (anchors whose value overlaps an answer of the conversation: one contains
  the other, case-insensitive, or they share a word of four characters or more) and the
  exam-value share (anchors whose value appears in the text of any exam item: a fact or one of
  the exam's own look-alikes, the kind of value the exam asks about, rather than padding or the
  agent's replies). Both are lower bounds of precision: an anchor outside them may still be a
  value someone will ask about;
- the context: the next request's tokens and their share of the uncompacted conversation's
  (system prompt plus every original message), each engine at the same model, threshold and
  padding (same seed).

A closed-book miss of an engine with an anchor index gets a cause: ``not extracted`` (the
extractor takes no value holding the answer from the planting message), ``other ref`` (the index
holds the answer only under another message's reference) or ``dropped`` (extracted, but not in
the final index).

The table gives each figure as the median and min–max over the seeds, an "all" row per engine
(each seed's facts pooled over the conversations), the lcm targets (closed-book ≥ 70 %, open-book
with the subject words ≥ 95 %, context ≤ 25 % of the uncompacted tokens) and lcm's closed-book
misses per kind of fact.

Cache-aware compaction timing (``bench/independent_timing.py``): ``--timing on`` plays each
engine with ``compression.idle_compaction`` on (rows ``<engine>+timing``), ``both`` plays it both
ways on the same scripts; ``--pauses <workload>`` plays a cache-economics workload's pauses
between the turns on a simulated clock shared by the simulator and the product, so a return after
the prompt cache expired can be compacted first (trigger ``idle``). The table then compares
closed-book and open-book recall with and without the timing, per engine and per seed.

The modules: ``bench/independent_exam.py`` (the exam), ``bench/independent_padding.py`` (the
seeded padding and the script), ``bench/independent_scoring.py`` (the pure scoring, ``Run``),
``bench/independent_table.py`` (the table), ``bench/independent_timing.py`` (pauses, clock and
timing settings); this one plays the scripts through the agent loop and runs the whole.

Run: .venv/bin/python bench/fidelity.py --exam independent [--quick] [--seeds 1 2 3]
     [--timing off|on|both] [--pauses none|steady|bursty|sparse|day|rapid|chat]
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench import independent_timing
from bench.independent_exam import CONVERSATIONS as CONVERSATIONS
from bench.independent_exam import EXAM_DIR as EXAM_DIR
from bench.independent_exam import Exam as Exam
from bench.independent_exam import Fact as Fact
from bench.independent_exam import Item as Item
from bench.independent_exam import all_answers as all_answers
from bench.independent_exam import load_exam as load_exam
from bench.independent_padding import PADDING as PADDING
from bench.independent_padding import QUICK_PADDING as QUICK_PADDING
from bench.independent_padding import Padding as Padding
from bench.independent_padding import Script as Script
from bench.independent_padding import Step as Step
from bench.independent_padding import build_script as build_script
from bench.independent_padding import estimated_tokens as estimated_tokens
from bench.independent_padding import holds_answer as holds_answer
from bench.independent_padding import read_request as read_request
from bench.independent_scoring import Context as Context
from bench.independent_scoring import Run as Run
from bench.independent_scoring import anchor_precision as anchor_precision
from bench.independent_scoring import closed_book as closed_book
from bench.independent_scoring import miss_cause as miss_cause
from bench.independent_scoring import open_book as open_book
from bench.independent_scoring import overlaps as overlaps
from bench.independent_scoring import summary_anchors as summary_anchors
from bench.independent_table import ENGINES as ENGINES
from bench.independent_table import MIN_COMPACTIONS as MIN_COMPACTIONS
from bench.independent_table import TARGETS as TARGETS
from bench.independent_table import Row as Row
from bench.independent_table import print_table as print_table
from bench.independent_table import rows as rows
from bench.independent_table import timing_lines as timing_lines
from bench.independent_timing import PAUSE_CHOICES as PAUSE_CHOICES
from bench.independent_timing import TIMING_CHOICES as TIMING_CHOICES
from bench.independent_timing import pause_sequence as pause_sequence
from compression.core.anchors import Anchor, extract_anchors

SEEDS = (1, 2, 3)
MODEL = "sim-claude-64k"
SEARCH_TOOL = "context_search"
SEARCH_LIMIT = 5
QUICK = {"conversations": ("trip",), "seeds": (1,)}


# --- Playing -------------------------------------------------------------------------------------

def _planting_message(conversation, turn, is_file: bool):
    """The stored message that planted an item: the note itself, or the tool result of the read."""
    from sessions.models import Message

    if not is_file:
        return turn.user_message
    return (Message.objects.filter(conversation=conversation, role="tool", visible=True, is_summary=False,
                                   id__gt=turn.user_message_id).order_by("id").first())


def _context_of(session, planting_texts: Mapping[str, str]) -> Context:
    """The live messages by reference and the summary's anchor index. A message merged into the
    summary counts as live when its text is a planting message's."""
    from compression.core.markers import is_summary_message, split_merged, summary_body_of
    from compression.core.tokens import content_text
    from sessions.services.context import context_rows
    from sessions.services.recall import context_refs, message_text

    live: dict[str, str] = {}
    anchors: list[Anchor] = []
    by_text = {text.strip(): ref for ref, text in planting_texts.items()}
    for row, (_, ref) in zip(context_rows(session), context_refs(session), strict=True):
        chat = row.as_chat()
        if row.is_summary or is_summary_message(chat):
            anchors.extend(summary_anchors(summary_body_of(chat)))
            own = content_text(split_merged(chat)[1]).strip()
            if own in by_text:
                live[by_text[own]] = own
        elif ref:
            live[ref] = message_text(row.role, row.content, row.tool_calls, row.name)
    return Context(live, tuple(anchors))


def play(script: Script, exam: Exam, engine_name: str, *, timing: bool = False, idle_when: str | None = None,
         pauses: Sequence[float] | None = None) -> tuple[Run, int, str]:
    """Play ``script`` through the agent loop with ``engine_name``, then score every fact; with
    ``pauses`` (seconds before each turn) on a clock moved forward by them, and with cache-aware
    compaction ``timing`` on or off. The run, its number of idle compactions and the prompt cache
    it played on (``independent_timing.cache_note``)."""
    from bench.agent_stage import final_context
    from sessions.models import CompressionEvent, Message
    from sessions.services.recall import message_text, ref_of
    from sessions.services.turns import turn_submit

    if pauses is not None and len(pauses) != len(script.steps):
        raise ValueError(f"{len(pauses)} pauses for {len(script.steps)} turns")
    started = time.perf_counter()
    name = independent_timing.label(engine_name, timing)
    with independent_timing.timed_stage(engine_name, f"exam-{script.shape}-{engine_name}-{script.seed}", MODEL,
                                        timing=timing, paused=pauses is not None,
                                        idle_when=idle_when) as (stage, sim_clock):
        user, row = stage.user, stage.conversation
        failed = 0
        planting: dict[str, Message | None] = {}
        for n, step in enumerate(script.steps):
            if sim_clock is not None and pauses and pauses[n]:
                sim_clock.advance(pauses[n])
            if step.file is not None:
                path = row.workspace / step.file[0]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step.file[1], encoding="utf-8")
            turn = turn_submit(user=user, conversation_id=row.id, text=step.text).turn
            turn.refresh_from_db()
            failed += turn.status != "done"
            if step.item:
                planting[step.item] = _planting_message(row, turn, step.file is not None)
        final = final_context(row)
        engine = final.engine
        texts = {ref_of(m.id): message_text(m.role, m.content, m.tool_calls, m.name)
                 for m in planting.values() if m is not None}
        context = _context_of(final.session, texts)
        searched = SEARCH_TOOL in {s.get("name") for s in engine.get_tool_schemas()}

        def search(query: str) -> list[dict]:
            if not searched:
                return []
            answer = json.loads(engine.handle_tool_call(SEARCH_TOOL, {"query": query, "limit": SEARCH_LIMIT}))
            return list(answer.get("results") or [])

        idle, cache = independent_timing.idle_compactions(row), independent_timing.cache_note(final.cfg, row)
        run = Run(shape=script.shape, engine=name, seed=script.seed, searched=searched,
                  turns=len(script.steps), failed_turns=failed,
                  compactions=CompressionEvent.objects.filter(conversation=row, status="compressed").count(),
                  context_tokens=final.context_tokens, uncompacted_tokens=final.uncompacted_tokens,
                  anchors=len(context.anchors), indexed=bool(context.anchors))
        for fact in exam.facts:
            message = planting.get(fact.item)
            ref = ref_of(message.id) if message is not None else ""
            text = texts.get(ref, "")
            if fact.answer.lower() not in text.lower():
                run.unplanted.append(fact.id)
            hit = bool(ref) and closed_book(fact.answer, ref, context)
            run.facts.append(fact.id)
            run.kinds.append(fact.kind)
            run.closed.append(hit)
            run.live.append(ref in context.live)
            run.open_subject.append(bool(ref) and open_book(fact.answer, ref, text, context, search(fact.q_subject)))
            run.open_other.append(bool(ref) and open_book(fact.answer, ref, text, context, search(fact.q_other)))
            cause = ""
            if not hit and run.indexed and message is not None:
                cause = miss_cause(fact.answer, ref, context.anchors, extract_anchors([message.as_chat()], [ref]))
            run.causes.append(cause)
        run.fact_bearing, run.exam_value = anchor_precision(context.anchors, exam.answers,
                                                            [i.text for i in exam.items])
    run.seconds = time.perf_counter() - started
    return run, idle, cache


# conversation, engine, seed, padding, timing, pauses, the idle rule (None: the product's default)
Job = tuple[str, str, int, Padding, bool, str, str | None]


def _run_job(job: Job) -> tuple[Run, int, str]:
    """One conversation, one engine, one seed, timing on or off (in a worker process: its own
    throwaway database)."""
    from bench import fidelity_latency

    shape, engine, seed, padding, timing, pauses, idle_when = job
    _ensure_django()
    fidelity_latency.quiet()
    exam = load_exam(shape)
    script = build_script(exam, seed, padding)
    waits = None if pauses == "none" else pause_sequence(pauses, seed, len(script.steps))
    run, idle, cache = play(script, exam, engine, timing=timing, pauses=waits, idle_when=idle_when)
    print(f"  {shape}/{run.engine}/seed {seed}: {run.turns} turns, {run.compactions} compactions "
          f"({idle} idle), {run.failed_turns} failed, {run.seconds:.0f} s", file=sys.stderr, flush=True)
    return run, idle, cache


def _ensure_django() -> None:
    """A throwaway SQLite database for a standalone run; inside a test run, the test's database."""
    from django.apps import apps

    from bench import fidelity_latency

    if apps.ready:
        return
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("HERMES_DATA_DIR", None)
    fidelity_latency.ensure_django(prefix="hermes-exam-")


# --- Running -------------------------------------------------------------------------------------

def main(*, quick: bool = False, seeds: Sequence[int] | None = None, conversations: Sequence[str] | None = None,
         jobs: int = 1, timing: str = "off", pauses: str = "none", idle_when: str | None = None) -> dict[str, Any]:
    """``timing``: off, on or both (``TIMING_CHOICES``); ``pauses``: none or a cache-economics
    workload whose pauses are played between the turns (``PAUSE_CHOICES``); ``idle_when``: the
    idle rule of the runs with the timing on (``compression.idle_compaction_when``; None: the
    product's default)."""
    if timing not in TIMING_CHOICES:
        raise ValueError(f"timing must be one of {', '.join(TIMING_CHOICES)}")
    if pauses not in PAUSE_CHOICES:
        raise ValueError(f"pauses must be one of {', '.join(PAUSE_CHOICES)}")
    shapes = tuple(conversations or (QUICK["conversations"] if quick else CONVERSATIONS))
    seeds = tuple(seeds or (QUICK["seeds"] if quick else SEEDS))
    padding = QUICK_PADDING if quick else PADDING
    work: list[Job] = [(shape, engine, seed, padding, timed, pauses, idle_when) for seed in seeds for shape in shapes
                       for engine in ENGINES for timed in independent_timing.timing_variants(timing)]
    if jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            played = list(pool.map(_run_job, work))
    else:
        played = [_run_job(job) for job in work]
    runs = [run for run, _, _ in played]
    idle = {(run.shape, run.engine, run.seed): n for run, n, _ in played}
    caches = sorted({cache for _, _, cache in played})
    print_table(runs, idle=idle, pauses=pause_notes(pauses, shapes, seeds, padding, caches))
    return {"runs": runs, "rows": rows(runs), "idle": idle}


def pause_notes(pauses: str, shapes: Sequence[str], seeds: Sequence[int], padding: Padding,
                caches: Sequence[str] = ()) -> list[str]:
    """The pauses played (one line per conversation and seed) and the prompt caches they were
    played on (none: no line)."""
    if pauses == "none":
        return []
    out = [f"Pauses before the turns: the cache-economics '{pauses}' workload's, at the exam's seed; "
           f"prompt cache: {', '.join(caches) or 'unknown'}"]
    for shape in shapes:
        exam = load_exam(shape)
        for seed in seeds:
            turns = len(build_script(exam, seed, padding).steps)
            out.append(f"{shape}/seed {seed}: "
                       + independent_timing.pause_summary(pause_sequence(pauses, seed, turns)))
    return out
