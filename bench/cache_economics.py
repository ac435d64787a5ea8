"""Prompt-cache economics of each caching strategy on one fixed, seeded, tool-heavy replay.

The workload (``build_workload``, seed ``SEED``): a workspace of ~40 files from 1.5K to 60K
characters (code, docs, CSV); ``--turns`` user messages (default 160) asking to read one or two
files, search, list, write a file, recall an earlier fact ("what ...?") or chat; before each turn the
user pauses — 80 % log-normal around 25 s (5–90 s), 16 % 2–15 min, 3 % 20–50 min, 1 % 1–2 h.
Every model call also takes ``CALL_SECONDS`` of simulated time. The model is ``sim-claude-200k``
(threshold 100,000 tokens), so the context is compressed several times.

Each strategy replays the same workload through the real agent loop (``turn_submit`` with Celery
eager, then ``turn_drain``) against a fresh in-process simulator whose ``SimClock`` the bench moves
by each pause, with ``prompt_caching.strategy``/``cache_ttl`` saved through the settings store. A
spec ``name@1h`` runs a strategy with ``cache_ttl = 1h`` (default 5m). Costs come from the
``ApiCall`` rows the product records (purpose ``agent`` and ``compression``), priced with
``llm.usage.compute_cost`` and the model's catalog price (USD per million tokens).

Columns, per strategy (agent calls unless stated):
- ``input $``: billed input cost = input x in + cache_read x read + write_5m x w5m + write_1h x w1h;
- ``vs none``: that cost / the same calls' prompt tokens at the base input price (no caching);
- ``vs s&3``: that cost / ``system_and_3``'s on the same replay;
- ``hit``: token-weighted hit rate, sum(cache_read) / sum(prompt tokens);
- ``write%``: share of the input cost that is cache writes (5m + 1h);
- ``rewarm``: per compression, agent calls from the first call after it up to and including the
  first whose own hit rate (cache_read / prompt) is at least ``REWARM_HIT_RATE`` (50 %); the mean,
  and every value in the detail line;
- ``total $``: agent input + output plus the summariser's calls (input + output);
- ``limit $`` and ``x limit``: the lower bound below, and input cost / lower bound.

Lower bound (``lower_bound``), computed from the same replay's agent requests as the simulator
flattened them (blocks in prefix order: tools, system, message content blocks; the block hashes
chain the whole prefix, cache markers stripped, so they do not depend on the strategy):
for each request in order, R = the tokens of its longest block prefix that an earlier request
already sent and that was last sent at most 1 hour before (the longest TTL anyone can buy; sending
it again refreshes it), billed at the cache-hit price; every other token is new: billed once at
the 5m write price if a later request reads it back within that hour chain, else at the base input
price (it never needed caching). It ignores the minimum cacheable length, the 20-block lookback,
the 4-breakpoint limit and the 1h write premium, so no breakpoint placement can cost less: every
token is either read (>= hit price, only if that prefix was sent within the hour) or billed at
least at the base price, and a token read later must have been written (>= 5m write price) once.

Run: .venv/bin/python bench/cache_economics.py [--turns 160] [--strategies none,system_and_3,...]
Targets: system_and_3 <= 25 % of the no-cache input cost; the best strategy >= 15 % cheaper than
system_and_3 with no more compressions; the whole run under 10 minutes.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import math
import os
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SEED = 20261130
DEFAULT_TURNS = 160
MODEL = "sim-claude-200k"
CALL_SECONDS = 2.0
REWARM_HIT_RATE = 0.5
LIMIT_TTL_SECONDS = 3600.0
DEFAULT_STRATEGIES = ("none", "system_and_3", "system_and_3@1h", "stable_prefix", "warm_anchor")
BASELINE = "system_and_3"
TARGET_S3_SHARE = 0.25
TARGET_BEST_SAVING = 0.15
PER_MILLION = 1_000_000


# ------------------------------------------------------------------------------------ workload

@dataclass(frozen=True)
class UserTurn:
    text: str
    pause: float  # seconds the user waited before sending it
    kind: str


@dataclass(frozen=True)
class Workload:
    files: dict[str, str]
    turns: list[UserTurn]


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
    """Seconds between turns: mostly a quick follow-up, sometimes a break (see the docstring)."""
    u = rng.random()
    if u < 0.80:
        return min(90.0, max(5.0, rng.lognormvariate(math.log(25.0), 0.7)))
    if u < 0.96:
        return math.exp(rng.uniform(math.log(120.0), math.log(900.0)))
    if u < 0.99:
        return rng.uniform(1_200.0, 3_000.0)
    return rng.uniform(3_600.0, 7_200.0)


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


def build_workload(turns: int = DEFAULT_TURNS, seed: int = SEED) -> Workload:
    rng = random.Random(seed)
    files = build_workspace(rng)
    paths = sorted(files)
    kinds = [k for k, _ in _TURN_KINDS]
    weights = [w for _, w in _TURN_KINDS]
    out: list[UserTurn] = []
    for n in range(turns):
        kind = "read" if n == 0 else rng.choices(kinds, weights)[0]
        pause = 0.0 if n == 0 else sample_pause(rng)
        out.append(UserTurn(_turn_text(rng, kind, paths, n), round(pause, 1), kind))
    return Workload(files, out)


# ---------------------------------------------------------------------------------- accounting

@dataclass
class Call:
    """One successful model call as recorded by the product, plus the request the simulator saw."""

    purpose: str  # agent | compression
    input: int
    output: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    time: float = 0.0
    block_tokens: Sequence[int] = ()
    block_hashes: Sequence[str] = ()

    @property
    def cache_write(self) -> int:
        return self.cache_write_5m + self.cache_write_1h

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def hit_rate(self) -> float:
        return self.cache_read / self.prompt if self.prompt else 0.0


def _usage(call: Call):
    from llm.usage import Usage

    return Usage(input=call.input, output=call.output, cache_read=call.cache_read, cache_write=call.cache_write,
                 cache_write_5m=call.cache_write_5m, cache_write_1h=call.cache_write_1h)


def input_cost(call: Call, price) -> float:
    """Billed input cost of one call: ``compute_cost`` without the output tokens."""
    from llm.usage import compute_cost

    return compute_cost(_usage(call), price).cost - call.output * price.output / PER_MILLION


def write_cost(call: Call, price) -> float:
    return (call.cache_write_5m * price.cache_write_5m + call.cache_write_1h * price.cache_write_1h) / PER_MILLION


def lower_bound(calls: Iterable[Call], price, ttl_seconds: float = LIMIT_TTL_SECONDS) -> float:
    """The input-cost floor of the module docstring over these requests (agent calls, in order)."""
    calls = list(calls)
    last_sent: dict[str, float] = {}
    origin: dict[str, int] = {}  # prefix hash -> the request that last sent it as new
    reused: set[tuple[str, int]] = set()
    reads: list[int] = []
    for r, call in enumerate(calls):
        hashes = call.block_hashes
        read_end = -1
        for i in range(len(hashes) - 1, -1, -1):
            seen = last_sent.get(hashes[i])
            if seen is not None and call.time - seen <= ttl_seconds:
                read_end = i
                break
        for i in range(read_end + 1):
            reused.add((hashes[i], origin.get(hashes[i], -1)))
        for i, h in enumerate(hashes):
            last_sent[h] = call.time
            if i > read_end:
                origin[h] = r
        reads.append(read_end)
    total = 0.0
    for r, (call, read_end) in enumerate(zip(calls, reads)):
        tokens = call.block_tokens
        read = sum(tokens[: read_end + 1])
        total += read * price.cache_read
        for i in range(read_end + 1, len(tokens)):
            total += tokens[i] * (price.cache_write_5m if (call.block_hashes[i], r) in reused else price.input)
    return total / PER_MILLION


def rewarm_counts(calls: Sequence[Call], threshold: float = REWARM_HIT_RATE) -> list[int | None]:
    """For each summariser call (a compression), the agent calls up to and including the first one
    whose hit rate reaches ``threshold`` (None: never within the replay)."""
    out: list[int | None] = []
    for k, call in enumerate(calls):
        if call.purpose != "compression":
            continue
        n, found = 0, None
        for later in calls[k + 1:]:
            if later.purpose != "agent":
                if later.purpose == "compression":
                    break
                continue
            n += 1
            if later.hit_rate >= threshold:
                found = n
                break
        out.append(found)
    return out


def summarize(calls: Sequence[Call], price, *, compressions: int | None = None) -> dict[str, Any]:
    agent = [c for c in calls if c.purpose == "agent"]
    aux = [c for c in calls if c.purpose != "agent"]
    cost_in = sum(input_cost(c, price) for c in agent)
    no_cache = sum(c.prompt for c in agent) * price.input / PER_MILLION
    writes = sum(write_cost(c, price) for c in agent)
    prompt = sum(c.prompt for c in agent)
    output = sum(c.output for c in agent) * price.output / PER_MILLION
    aux_cost = sum(input_cost(c, price) + c.output * price.output / PER_MILLION for c in aux)
    limit = lower_bound(agent, price)
    rewarm = rewarm_counts(calls)
    done = [r for r in rewarm if r is not None]
    return {
        "agent_calls": len(agent),
        "summariser_calls": len(aux),
        "compressions": len(rewarm) if compressions is None else compressions,
        "prompt_tokens": prompt,
        "cache_read": sum(c.cache_read for c in agent),
        "cache_write_5m": sum(c.cache_write_5m for c in agent),
        "cache_write_1h": sum(c.cache_write_1h for c in agent),
        "input_cost": cost_in,
        "no_cache_input_cost": no_cache,
        "relative_to_none": cost_in / no_cache if no_cache else 0.0,
        "hit_rate": sum(c.cache_read for c in agent) / prompt if prompt else 0.0,
        "write_share": writes / cost_in if cost_in else 0.0,
        "rewarm": rewarm,
        "rewarm_mean": sum(done) / len(done) if done else None,
        "output_cost": output,
        "summariser_cost": aux_cost,
        "total_cost": cost_in + output + aux_cost,
        "lower_bound": limit,
        "x_lower_bound": cost_in / limit if limit else 0.0,
    }


# ----------------------------------------------------------------------------------- the replay

def _fast_tmp() -> str | None:
    """A RAM-backed folder for the throwaway database when there is one (SQLite commits are the
    replay's main wait on a disk)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _ensure_django() -> None:
    """Configure Django for a standalone run (a test run has done it already)."""
    import django
    from django.apps import apps

    if apps.ready:
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    data_dir = tempfile.mkdtemp(prefix="hermes-cache-bench-", dir=_fast_tmp())
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    os.environ["HERMES_DATA_DIR"] = data_dir
    os.environ["HERMES_CELERY_EAGER"] = "true"
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("ANTHROPIC_API_KEY", None)
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _recording_simulator(clock):
    """A simulator whose prefix cache also keeps each request's block tokens, hashes and time."""
    from llm.simulator import Simulator
    from llm.simulator.cache import PrefixCache

    class RecordingCache(PrefixCache):
        def __init__(self):
            super().__init__()
            self.requests: list[tuple[float, list[int], list[str]]] = []

        def account(self, tokens, hashes, markers, *, now, min_tokens):
            result = super().account(tokens, hashes, markers, now=now, min_tokens=min_tokens)
            self.requests.append((now, list(tokens), list(hashes)))
            clock.advance(CALL_SECONDS)  # the model's answer takes a moment of simulated time
            return result

    sim = Simulator(clock=clock)
    sim.cache = RecordingCache()
    return sim


def parse_spec(spec: str) -> tuple[str, str]:
    name, _, ttl = spec.partition("@")
    return name, ttl or "5m"


def replay(spec: str, workload: Workload, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the workload for one strategy spec and return its calls and figures."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from compression import settings_store
    from hermes_web.celery import app
    from llm.models import get_model
    from llm.simulator import SimClock, start_simulator
    from sessions.models import ApiCall, CompressionEvent, Conversation
    from sessions.services.context import session_start
    from sessions.services.turns import turn_drain, turn_submit


    name, ttl = parse_spec(spec)
    clock = SimClock(start=1_000_000.0)
    sim = _recording_simulator(clock)
    server = start_simulator(simulator=sim)
    eager = app.conf.task_always_eager
    started = time.perf_counter()
    try:
        with override_settings(
            HERMES_SIMULATOR_URL=server.base_url,
            CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
        ):
            app.conf.task_always_eager = True
            settings_store.save_group("caching", {"strategy": name, "cache_ttl": ttl})
            user_model = get_user_model()
            user = user_model.objects.create_user(f"bench-{name}-{ttl}-{time.monotonic_ns()}", password=None)
            conversation = Conversation.objects.create(owner=user, provider="simulator", model=MODEL)
            session_start(conversation=conversation)
            for rel, text in workload.files.items():
                path = conversation.workspace / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            failed = 0
            for n, turn in enumerate(workload.turns):
                if turn.pause:
                    clock.advance(turn.pause)
                t, _ = turn_submit(user=user, conversation_id=conversation.id, text=turn.text)
                turn_drain(conversation_id=conversation.id)  # no-op when Celery eager already ran it
                t.refresh_from_db()
                failed += t.status != "done"
                if progress and (n + 1) % 40 == 0:
                    progress(f"  {spec}: {n + 1}/{len(workload.turns)} turns")
    finally:
        app.conf.task_always_eager = eager
        server.stop()
    rows = list(ApiCall.objects.filter(conversation=conversation, error="").order_by("id"))
    recorded = sim.cache.requests
    if len(rows) != len(recorded):
        raise RuntimeError(f"{spec}: {len(rows)} recorded calls but the simulator saw {len(recorded)} requests")
    calls = [
        Call(r.purpose, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_5m_tokens,
             r.cache_write_1h_tokens, now, tokens, hashes)
        for r, (now, tokens, hashes) in zip(rows, recorded)
    ]
    for call, (_, tokens, _) in zip(calls, recorded):
        if call.prompt != sum(tokens):
            raise RuntimeError(f"{spec}: a recorded prompt ({call.prompt}) differs from the request ({sum(tokens)})")
    compressions = CompressionEvent.objects.filter(conversation=conversation, status="compressed").count()
    price = get_model(MODEL).price
    figures = summarize(calls, price, compressions=compressions)
    figures.update(spec=spec, failed_turns=failed, seconds=time.perf_counter() - started)
    return {"calls": calls, "figures": figures}


# ---------------------------------------------------------------------------------------- output

def format_table(results: dict[str, dict[str, Any]]) -> str:
    base = results.get(BASELINE, {}).get("figures")
    head = (f"{'strategy':<18}{'input $':>9}{'vs none':>9}{'vs s&3':>8}{'hit':>7}{'write%':>8}{'rewarm':>8}"
            f"{'compr':>6}{'total $':>9}{'limit $':>9}{'x limit':>8}{'secs':>6}")
    lines = [head, "-" * len(head)]
    for spec, res in results.items():
        f = res["figures"]
        vs = f"{f['input_cost'] / base['input_cost']:.3f}" if base and base["input_cost"] else "-"
        rw = "-" if f["rewarm_mean"] is None else f"{f['rewarm_mean']:.1f}"
        lines.append(
            f"{spec:<18}{f['input_cost']:>9.4f}{f['relative_to_none']:>9.3f}{vs:>8}{f['hit_rate']:>7.1%}"
            f"{f['write_share']:>8.1%}{rw:>8}{f['compressions']:>6}{f['total_cost']:>9.4f}{f['lower_bound']:>9.4f}"
            f"{f['x_lower_bound']:>8.2f}{f['seconds']:>6.0f}"
        )
    lines.append("")
    lines.append("input $ = agent calls' billed input; vs none = / the same prompts uncached; hit = read / prompt; "
                 "write% = writes' share of input $;")
    lines.append(f"rewarm = agent calls after a compression until one reads >= {REWARM_HIT_RATE:.0%} of its prompt; "
                 "total $ = agent in+out + summariser;")
    lines.append("limit $ = every prefix re-sent within 1h at the hit price, every new token once (5m write price "
                 "if read back later, else base input).")
    lines.append("")
    for spec, res in results.items():
        f = res["figures"]
        lines.append(f"{spec}: {f['agent_calls']} agent calls, {f['summariser_calls']} summariser calls "
                     f"(${f['summariser_cost']:.4f}), failed turns {f['failed_turns']}, rewarm per compression "
                     f"{f['rewarm']}")
    return "\n".join(lines)


def verdict(results: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    base = results.get(BASELINE, {}).get("figures")
    if not base:
        return out
    out.append(f"target system_and_3 <= {TARGET_S3_SHARE:.0%} of no-cache input: {base['relative_to_none']:.1%} "
               f"-> {'MET' if base['relative_to_none'] <= TARGET_S3_SHARE else 'MISSED'}")
    others = {s: r["figures"] for s, r in results.items() if s not in (BASELINE, "none")}
    if others:
        best, f = min(others.items(), key=lambda kv: kv[1]["input_cost"])
        saving = 1 - f["input_cost"] / base["input_cost"]
        ok = saving >= TARGET_BEST_SAVING and f["compressions"] <= base["compressions"]
        out.append(f"target best >= {TARGET_BEST_SAVING:.0%} cheaper than system_and_3: {best} {saving:.1%} cheaper, "
                   f"{f['compressions']} vs {base['compressions']} compressions -> {'MET' if ok else 'MISSED'}")
    return out


def _quiet() -> None:
    for name in ("httpx2", "celery", "compression", "sessions"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _replay_in_worker(spec: str, turns: int, seed: int) -> dict[str, Any]:
    """One strategy in a fresh process (own throwaway database): figures and light call rows."""
    _ensure_django()
    _quiet()
    res = replay(spec, build_workload(turns, seed))
    res["calls"] = [Call(c.purpose, c.input, c.output, c.cache_read, c.cache_write_5m, c.cache_write_1h, c.time)
                    for c in res["calls"]]
    return res


def main(turns: int = DEFAULT_TURNS, strategies: Sequence[str] = DEFAULT_STRATEGIES, seed: int = SEED,
         out: Callable[[str], None] | None = print, jobs: int = 1) -> dict[str, Any]:
    """Replay the workload once per strategy; print the table (unless ``out`` is None); return
    ``{"results": {spec: {"calls", "figures"}}, "workload": ..., "seconds": ...}``.

    ``jobs`` > 1 runs the strategies in that many worker processes, each with its own throwaway
    database (the replays are independent); ``jobs=1`` runs them here, in this Django setup."""
    started = time.perf_counter()
    workload = build_workload(turns, seed)
    if out:
        pauses = [t.pause for t in workload.turns[1:]]
        long_ = sum(1 for p in pauses if p > 300)
        out(f"cache economics: {turns} turns on {MODEL}, seed {seed}; {long_} of {len(pauses)} pauses > 5 min, "
            f"median pause {sorted(pauses)[len(pauses) // 2] if pauses else 0:.0f} s")
    if jobs > 1 and len(strategies) > 1:
        import concurrent.futures
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(strategies)), mp_context=ctx) as pool:
            futures = {spec: pool.submit(_replay_in_worker, spec, turns, seed) for spec in strategies}
            results = {spec: futures[spec].result() for spec in strategies}
    else:
        _ensure_django()
        _quiet()
        results = {spec: replay(spec, workload, progress=out) for spec in strategies}
    seconds = time.perf_counter() - started
    if out:
        out(format_table(results))
        for line in verdict(results):
            out(line)
        out(f"wall time {seconds:.0f} s")
    return {"results": results, "workload": workload, "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help="comma-separated strategy names, name@1h for a 1h cache_ttl")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes (each strategy replays in its own); 1 = in this process")
    args = parser.parse_args()
    main(turns=args.turns, strategies=[s for s in args.strategies.split(",") if s], seed=args.seed, jobs=args.jobs)
