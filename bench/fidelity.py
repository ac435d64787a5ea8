"""How much of a long conversation the agent can still reach after compaction, per context engine.

Three seeded, long, tool-heavy conversations (``bench/fidelity_conversations.py``: coding,
research, planning; 44 planted facts each, at every depth) run through the real agent loop
(Celery eager, SQLite) on the simulator's 64k-token model until at least three compactions, once
per engine (``compressor``, ``lcm``). Then one question per fact, scored offline on what the
engine guarantees, never on the simulator's summary prose:

- closed-book: the answer string is in what the model would receive next, counting the live
  messages other than the summary and, for lcm, the summary's anchor index;
- open-book: closed-book, or one ``context_search`` whose query is the question itself returns a
  snippet holding the answer (lcm only: the compressor has no tools);
- with ``ANTHROPIC_API_KEY`` set (or ``--grader``), a model answers each question from that context
  (with the engine's tools, two rounds at most), graded by exact match, with the run's tokens and
  cost: ``--grader anthropic`` the real model, ``--grader simulator`` only exercises that code.

The table gives each score with the context it was reached at (tokens of the next request, and
its share of the uncompacted conversation), closed-book by depth (the oldest third, the middle,
the newest), and the recall tools' latency at 20,000 archived messages on SQLite and PostgreSQL
(``bench/fidelity_latency.py``). Targets: lcm open-book ≥ 90 % at ≤ 25 % of the uncompacted
tokens after ≥ 3 compactions; the tools ≤ 50 ms p50.

``--exam independent`` plays the independent exam instead (``bench/exam_independent/``, scored
by ``bench/fidelity_independent.py``: closed- and open-book on the planting message's reference,
both question wordings, three padding seeds, anchor precision); its options are ``--seeds``,
``--conversations``, ``--timing off|on|both`` (cache-aware compaction timing), ``--idle-when``
(its idle rule, ``compression.idle_compaction_when``) and ``--pauses`` (none, or a cache-economics
workload's pauses between the turns); ``--grader``, ``--shapes`` and the latency options are the fidelity exam's.

Run: .venv/bin/python bench/fidelity.py [--quick] [--no-postgres] [--postgres-url URL] [--grader simulator]
     .venv/bin/python bench/fidelity.py --exam independent [--quick] [--seeds 1 2 3] [--jobs 1]
         [--timing off|on|both] [--pauses none|steady|bursty|sparse|day|rapid|chat]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import fidelity_independent, fidelity_latency
from bench.fidelity_conversations import SHAPES, Conversation, build_conversation
from compression.core.compaction_timing import DEFAULT_IDLE_WHEN, IDLE_WHEN_CHOICES

MODEL = "sim-claude-64k"
ENGINES = ("compressor", "lcm")
MIN_COMPACTIONS = 3
SEARCH_LIMIT = 5
EXAM_MODEL = "claude-haiku-4-5"
EXAM_TOOL_ROUNDS = 2
QUICK = {"shapes": ("coding",), "facts": 12, "target_tokens": 80_000, "latency_messages": 2_000}
TARGETS = {"open_book": 0.90, "context_share": 0.25, "tool_p50_ms": 50.0}


@dataclass
class Run:
    shape: str
    engine: str
    facts: int
    compactions: int
    failed_turns: int
    uncompacted_tokens: int
    context_tokens: int
    closed: list[bool]
    opened: list[bool]
    depths: list[float]
    search_ms: list[float]
    seconds: float
    exam: dict[str, Any] | None = None

    @property
    def share(self) -> float:
        return self.context_tokens / self.uncompacted_tokens if self.uncompacted_tokens else 0.0


def _ensure_django() -> None:
    """The conversations run on a throwaway SQLite database (PostgreSQL is measured in a child);
    inside a test run Django is set up already and its database is used."""
    from django.apps import apps

    if apps.ready:
        return
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("HERMES_DATA_DIR", None)
    fidelity_latency.ensure_django(prefix="hermes-fidelity-")


def _guaranteed_text(messages: list[dict], engine: str) -> str:
    """What the engine guarantees the model sees: every live message in full, and of a summary
    only its anchor index (lcm); never the summary's prose."""
    from compression.core.lcm import split_lcm_body
    from compression.core.markers import is_summary_message, own_text, summary_body_of
    from sessions.services.recall import message_text

    parts = []
    for msg in messages:
        if is_summary_message(msg):
            if engine == "lcm":
                parts.append(split_lcm_body(summary_body_of(msg))[1])
            if msg.get("_summary_merged"):
                parts.append(own_text(msg))
            continue
        parts.append(message_text(msg.get("role", ""), msg.get("content"), msg.get("tool_calls")))
    return "\n".join(parts)


def _exam_route(route: str | None, simulator_url: str):
    """(provider, model) of the exam: the real model with a key, the simulator when asked (which
    only exercises the exam's code: its answers are no measure of anything), else None."""
    from llm.providers import get_provider

    if route == "anthropic":
        return get_provider("anthropic", api_key=os.environ["ANTHROPIC_API_KEY"]), EXAM_MODEL
    if route == "simulator":
        return get_provider("simulator", base_url=simulator_url), MODEL
    return None, ""


def run_conversation(conv: Conversation, engine_name: str, *, exam_route: str | None = None) -> Run:
    """Play ``conv`` through the agent loop with ``engine_name``, then score every fact."""
    from bench.agent_stage import agent_stage, final_context
    from sessions.models import CompressionEvent
    from sessions.services.turns import turn_submit

    started = time.perf_counter()
    with agent_stage(engine_name, f"fidelity-{conv.shape}-{engine_name}", MODEL) as stage:
        user, row = stage.user, stage.conversation
        for rel, text in conv.files.items():
            path = row.workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        failed = 0
        for text in conv.turns:
            turn = turn_submit(user=user, conversation_id=row.id, text=text).turn
            turn.refresh_from_db()
            failed += turn.status != "done"
        final = final_context(row)
        engine, messages, tools = final.engine, final.messages, final.tools
        seen = _guaranteed_text(messages, engine_name)
        closed, opened, search_ms = [], [], []
        for fact in conv.facts:
            hit = fact.answer in seen
            closed.append(hit)
            if engine_name == "lcm":
                t0 = time.perf_counter()
                answer = json.loads(engine.handle_tool_call("context_search",
                                                            {"query": fact.question, "limit": SEARCH_LIMIT}))
                search_ms.append((time.perf_counter() - t0) * 1000)
                hit = hit or any(fact.answer in r.get("snippet", "") for r in answer.get("results", []))
            opened.append(hit)
        exam = None
        exam_provider, exam_model = _exam_route(exam_route, stage.simulator_url)
        if exam_provider is not None:
            from bench.fidelity_exam import exam as run_exam
            from sessions.agent.tools import run_tool

            def workspace_tool(name: str, arguments: str) -> str:
                return run_tool(name, arguments, workspace=row.workspace, terminal_enabled=False,
                                terminal_timeout=final.cfg.agent.terminal_timeout,
                                terminal_network=False).content

            exam = run_exam(exam_provider, exam_model, messages, tools, engine, conv.facts, workspace_tool)
        compactions = CompressionEvent.objects.filter(conversation=row, status="compressed").count()
    return Run(conv.shape, engine_name, len(conv.facts), compactions, failed, final.uncompacted_tokens,
               final.context_tokens, closed, opened, [conv.depth(i) for i in range(len(conv.facts))], search_ms,
               time.perf_counter() - started, exam)


def _pct(hits: list[bool]) -> str:
    return f"{100.0 * sum(hits) / len(hits):5.1f} %" if hits else "    —"


def _by_depth(run: Run) -> str:
    thirds = [[c for c, d in zip(run.closed, run.depths) if lo <= d < hi] for lo, hi in
              ((0, 1 / 3), (1 / 3, 2 / 3), (2 / 3, 1.01))]
    return " / ".join(_pct(t).strip() for t in thirds)


def print_table(runs: list[Run], latency: list[dict[str, Any]]) -> None:
    print("\nFidelity after compaction — real agent loop on the simulator's 64k model, one question per planted fact")
    head = (f"{'conversation':<12} {'engine':<10} {'facts':>5} {'compactions':>11} {'uncompacted':>11} "
            f"{'context':>8} {'share':>6} {'closed-book':>11} {'open-book':>9}  closed-book by depth (old/mid/new)")
    print(head)
    print("-" * len(head))
    for r in runs:
        opened = _pct(r.opened) if r.engine == "lcm" else "    —"
        print(f"{r.shape:<12} {r.engine:<10} {r.facts:>5} {r.compactions:>11} {r.uncompacted_tokens:>11,} "
              f"{r.context_tokens:>8,} {100 * r.share:5.1f}% {_pct(r.closed):>11} {opened:>9}  {_by_depth(r)}")
    for engine in ENGINES:
        mine = [r for r in runs if r.engine == engine]
        if len(mine) > 1:
            closed = [c for r in mine for c in r.closed]
            opened = [o for r in mine for o in r.opened]
            share = max(r.share for r in mine)
            print(f"{'all':<12} {engine:<10} {len(closed):>5} {min(r.compactions for r in mine):>11} "
                  f"{sum(r.uncompacted_tokens for r in mine):>11,} {sum(r.context_tokens for r in mine):>8,} "
                  f"{100 * share:5.1f}% {_pct(closed):>11} {_pct(opened) if engine == 'lcm' else '    —':>9}")
    print("(share: the next request's tokens over the uncompacted conversation's; 'all' shows the largest share)")
    exams = [r for r in runs if r.exam]
    if exams:
        print("\nModel exam (exact match; a simulator's answers only show the exam runs):")
        for r in exams:
            e = r.exam
            print(f"  {r.shape:<10} {r.engine:<10} {e['score']:6.1%}  {e['input_tokens']:,} in / "
                  f"{e['output_tokens']:,} out tokens, ${e['cost']:.2f}, {e['tool_calls']} tool calls ({e['model']})")
    elif not os.environ.get("ANTHROPIC_API_KEY"):
        print("\nReal-model exam: skipped (ANTHROPIC_API_KEY is not set).")
    searches = sorted(ms for r in runs for ms in r.search_ms)
    if searches:
        print(f"context_search during scoring: p50 {searches[len(searches) // 2]:.1f} ms over {len(searches)} calls")
    fidelity_latency.print_latency(latency)
    lcm = [r for r in runs if r.engine == "lcm"]
    if lcm:
        opened = [o for r in lcm for o in r.opened]
        score, share = sum(opened) / len(opened), max(r.share for r in lcm)
        enough = min(r.compactions for r in lcm) >= MIN_COMPACTIONS
        met = score >= TARGETS["open_book"] and share <= TARGETS["context_share"] and enough
        print(f"Target lcm open-book ≥ {TARGETS['open_book']:.0%} at ≤ {TARGETS['context_share']:.0%} of the "
              f"uncompacted tokens after ≥ {MIN_COMPACTIONS} compactions: {'met' if met else 'NOT met'} "
              f"({score:.1%} at {share:.1%}, {min(r.compactions for r in lcm)} compactions at least)")


def _run_job(job: tuple[str, str, dict[str, int], str | None]) -> Run:
    """One conversation with one engine (in a worker process: its own throwaway database)."""
    shape, engine, sizes, exam = job
    _ensure_django()
    fidelity_latency.quiet()
    conv = build_conversation(shape, **sizes)
    run = run_conversation(conv, engine, exam_route=exam)
    print(f"  {shape}/{engine}: {len(conv.turns)} turns, {run.compactions} compactions, "
          f"{run.failed_turns} failed, {run.seconds:.0f} s", file=sys.stderr, flush=True)
    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one small conversation (and 2,000 archived messages; the independent exam: one seed)")
    parser.add_argument("--shapes", nargs="*", choices=sorted(SHAPES), default=None)
    parser.add_argument("--no-postgres", action="store_true", help="measure the recall tools on SQLite only")
    parser.add_argument("--postgres-url", default=os.environ.get("FIDELITY_POSTGRES_URL",
                                                                   "postgres://postgres@127.0.0.1:5432/postgres"),
                        help="a PostgreSQL server where a throwaway database may be created")
    parser.add_argument("--latency-messages", type=int, default=None)
    parser.add_argument("--exam", choices=("fidelity", "independent"), default="fidelity",
                        help="the exam: this module's planted facts (default) or bench/exam_independent/")
    parser.add_argument("--grader", choices=("anthropic", "simulator"), default=None,
                        help="who answers the fidelity exam's questions (default: the real model when "
                             "ANTHROPIC_API_KEY is set, else no one); 'simulator' only exercises that code")
    parser.add_argument("--seeds", nargs="+", type=int, default=None,
                        help="independent exam: the padding seeds (default 1 2 3; one with --quick)")
    parser.add_argument("--conversations", nargs="+", choices=fidelity_independent.CONVERSATIONS, default=None,
                        help="independent exam: the conversations played (default all; one with --quick)")
    parser.add_argument("--timing", choices=fidelity_independent.TIMING_CHOICES, default="off",
                        help="independent exam: cache-aware compaction timing off (default), on, or both "
                             "(each engine both ways on the same scripts, rows '<engine>+timing')")
    parser.add_argument("--pauses", choices=fidelity_independent.PAUSE_CHOICES, default="none",
                        help="independent exam: the pauses between turns: none (default), or a cache-economics "
                             "workload's at the exam's seed, played on a simulated clock")
    parser.add_argument("--idle-when", choices=IDLE_WHEN_CHOICES, default=None,
                        help="independent exam: which cold returns compact when the timing is on "
                             "(compression.idle_compaction_when; default: the product's, "
                             f"{DEFAULT_IDLE_WHEN})")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="conversations played at once, each in its own process and database")
    return parser


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.exam != "independent" and (args.timing != "off" or args.pauses != "none" or args.idle_when):
        parser.error("--timing, --pauses and --idle-when are options of --exam independent")
    if args.exam == "independent":
        return fidelity_independent.main(quick=args.quick, seeds=args.seeds, conversations=args.conversations,
                                         jobs=args.jobs, timing=args.timing, pauses=args.pauses,
                                         idle_when=args.idle_when)
    shapes = args.shapes or (QUICK["shapes"] if args.quick else tuple(SHAPES))
    sizes = {"facts": QUICK["facts"], "target_tokens": QUICK["target_tokens"]} if args.quick else {}
    n_latency = args.latency_messages or (QUICK["latency_messages"] if args.quick else fidelity_latency.MESSAGES)

    exam = args.grader or ("anthropic" if os.environ.get("ANTHROPIC_API_KEY") else None)
    jobs = [(shape, engine, sizes, exam) for shape in shapes for engine in ENGINES]
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            runs = list(pool.map(_run_job, jobs))
    else:
        runs = [_run_job(job) for job in jobs]
    _ensure_django()
    fidelity_latency.quiet()
    latency = [fidelity_latency.measure_in_process(n_latency)]
    if not args.no_postgres:
        latency.append(fidelity_latency.measure_postgres(args.postgres_url, n_latency))
    print_table(runs, latency)
    return {"runs": runs, "latency": latency}


if __name__ == "__main__":
    main()
