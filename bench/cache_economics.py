"""Prompt-cache economics of each caching strategy on two fixed, seeded, tool-heavy replays, under
the documented caching rules and, beside them, under the optimistic reading of the one point the
documentation leaves open (docs/simulator.md, "Caching").

The workload (``build_workload``): a workspace of ~40 files from 1.5K to 60K characters (code,
docs, CSV); ``--turns`` user messages (default 160) asking to read one or two files, search, list,
write a file, recall an earlier fact ("what ...?") or chat. Before each turn the user pauses, by
one of two patterns, each with its own seed (``SEEDS``):
- ``steady``: 80 % log-normal around 25 s (5–90 s), 16 % 2–15 min, 3 % 20–50 min, 1 % 1–2 h;
- ``bursty``: bursts of quick turns (84 %, around 12 s) cut by breaks: 4 % 5.5–10 min, 7.2 %
  12–55 min, 4.8 % 65 min–3 h.
Every model call also takes ``CALL_SECONDS`` of simulated time. The model is ``sim-claude-200k``
(threshold 100,000 tokens), so the context is compressed several times.

Each strategy replays each workload once through the real agent loop (``turn_submit`` with Celery
eager, then ``turn_drain``) against a fresh in-process simulator whose ``SimClock`` the bench moves
by each pause, with ``prompt_caching.strategy``/``cache_ttl`` saved through the settings store. A
spec ``name@1h`` runs a strategy with ``cache_ttl = 1h`` (default 5m). The simulator bills in its
default ``documented`` mode, so the product records documented usage; the same requests also go,
in order, through a second prefix cache in ``optimistic`` mode, whose usage gives the optimistic
columns. The requests do not depend on the mode (the product reacts to prompt sizes, which the
mode does not change), so both columns describe the one call sequence. Costs come from the
``ApiCall`` rows the product records (documented; purpose ``agent`` and ``compression``) and from
the second cache's results (optimistic), priced with ``llm.usage.compute_cost`` and the model's
catalog price (USD per million tokens); the bench checks the rows against the simulator's own
accounting, call by call.

Columns, per strategy and mode (agent calls unless stated):
- ``input $``: billed input cost = input x in + cache_read x read + write_5m x w5m + write_1h x w1h;
- ``vs none``: that cost / the same calls' prompt tokens at the base input price (no caching);
- ``vs s&3``: that cost / ``system_and_3``'s in the same mode on the same replay;
- ``hit``: token-weighted hit rate, sum(cache_read) / sum(prompt tokens);
- ``write%``: share of the input cost that is cache writes (5m + 1h);
- ``x limit``: input cost / the lower bound below;
- ``rewarm`` (documented): per compression, agent calls from the first call after it up to and
  including the first whose own hit rate (cache_read / prompt) is at least ``REWARM_HIT_RATE``
  (50 %); the mean, and every value in the detail line;
- ``total $`` (documented): agent input + output plus the summariser's calls (input + output).
Every strategy of a workload must send the same requests (same prompt tokens, call by call): the
bench checks it, so the strategies differ in billing only, never in what the model saw (the same
compressions, the same fidelity).

Lower bound (``lower_bound``), computed from the same replay's agent requests as the simulator
flattened them (blocks in prefix order: tools, system, message content blocks; the block hashes
chain the whole prefix, cache markers stripped, so they do not depend on the strategy):
for each request in order, R = the tokens of its longest block prefix that an earlier request
already sent and that was last sent at most 1 hour before (the longest TTL anyone can buy; sending
it again refreshes it), billed at the cache-hit price; every other token is new: billed once at
the 5m write price if a later request reads it back within that hour chain, else at the base input
price (it never needed caching). It holds under the documented rules: every token is either read
(>= hit price, only if that prefix was sent within the hour) or billed at least at the base price,
and a token read later must have been written (>= 5m write price) once. A reuse more than 5 minutes
later needs no 1h write of that token: a 1h breakpoint one block further on is billed at 1h only for
what it newly writes (B - A) yet stores an entry for the whole prefix, so a prefix written at the
5m price stays readable for an hour ("rolling_1h" rests on this). The bound ignores the minimum
cacheable length, the 20-position lookback, the 4-breakpoint limit and that one-block premium.

Run: .venv/bin/python bench/cache_economics.py [--turns 160] [--strategies none,system_and_3,...]
     [--workloads steady,bursty] [--jobs 2]
Targets, per workload, under the documented rules: system_and_3 <= 25 % of the no-cache input
cost; the best strategy >= 15 % cheaper than system_and_3 with no more compressions.
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SEED = 20261130
DEFAULT_TURNS = 160
MODEL = "sim-claude-200k"
CALL_SECONDS = 2.0
REWARM_HIT_RATE = 0.5
LIMIT_TTL_SECONDS = 3600.0
DEFAULT_STRATEGIES = ("none", "system_and_3", "system_and_3@1h", "stable_prefix", "warm_anchor", "rolling_1h")
DEFAULT_WORKLOADS = ("steady", "bursty")
MODES = ("documented", "optimistic")
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


# ---------------------------------------------------------------------------------- accounting

@dataclass
class Call:
    """One successful model call as billed, plus the request the simulator saw."""

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


@dataclass(frozen=True)
class Seen:
    """One request as the simulator accounted it: when, its blocks, and the usage of each mode."""

    time: float
    tokens: list[int]
    hashes: list[str]
    usage: dict[str, Any]  # mode -> CacheResult


def _recording_simulator(clock, billing: str = "documented"):
    """A simulator billing in ``billing`` mode whose prefix cache keeps each request's blocks and
    time, and also runs every request through a second cache in the other mode."""
    from simulator import Simulator
    from simulator.cache import PrefixCache

    other = next(m for m in MODES if m != billing)

    class RecordingCache(PrefixCache):
        def __init__(self):
            super().__init__(mode=billing)
            self.shadow = PrefixCache(mode=other)
            self.requests: list[Seen] = []

        def account(self, tokens, hashes, markers, *, now, min_tokens, **options):
            result = super().account(tokens, hashes, markers, now=now, min_tokens=min_tokens, **options)
            shadow = self.shadow.account(tokens, hashes, markers, now=now, min_tokens=min_tokens, **options)
            self.requests.append(Seen(now, list(tokens), list(hashes), {billing: result, other: shadow}))
            clock.advance(CALL_SECONDS)  # the model's answer takes a moment of simulated time
            return result

        def clear(self):
            super().clear()
            self.shadow.clear()

    sim = Simulator(clock=clock, cache_mode=billing)
    sim.cache = RecordingCache()
    return sim


def parse_spec(spec: str) -> tuple[str, str]:
    name, _, ttl = spec.partition("@")
    return name, ttl or "5m"


def _calls_of(rows, seen: Sequence[Seen], spec: str, billing: str) -> dict[str, list[Call]]:
    """The billed mode's calls from the product's rows (checked against the simulator's accounting)
    and the other mode's from the second cache, request by request."""
    if len(rows) != len(seen):
        raise RuntimeError(f"{spec}: {len(rows)} recorded calls but the simulator saw {len(seen)} requests")
    out: dict[str, list[Call]] = {m: [] for m in MODES}
    for r, s in zip(rows, seen):
        call = Call(r.purpose, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_5m_tokens,
                    r.cache_write_1h_tokens, s.time, s.tokens, s.hashes)
        for mode, u in s.usage.items():
            if mode == billing:
                if (call.input, call.cache_read, call.cache_write_5m, call.cache_write_1h) != (
                        u.input, u.read, u.write_5m, u.write_1h):
                    raise RuntimeError(f"{spec}: a recorded usage differs from what the simulator billed")
                out[mode].append(call)
            else:
                out[mode].append(replace(call, input=u.input, cache_read=u.read, cache_write_5m=u.write_5m,
                                         cache_write_1h=u.write_1h))
    return out


def replay(spec: str, workload: Workload, *, progress: Callable[[str], None] | None = None,
           billing: str = "documented") -> dict[str, Any]:
    """Run the workload for one strategy spec; return, per mode, its calls and figures. The
    simulator bills in ``billing`` mode (what the product records); the other mode's figures come
    from the second cache."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from compression import settings_store
    from hermes_web.celery import app
    from llm.models import get_model
    from sessions.agent.loop import turn_drain
    from sessions.models import ApiCall, CompressionEvent, Conversation
    from sessions.services.context import session_start
    from sessions.services.turns import turn_submit
    from simulator import SimClock, start_simulator

    name, ttl = parse_spec(spec)
    clock = SimClock(start=1_000_000.0)
    sim = _recording_simulator(clock, billing)
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
                    progress(f"  {workload.pattern} {spec}: {n + 1}/{len(workload.turns)} turns")
    finally:
        app.conf.task_always_eager = eager
        server.stop()
    rows = list(ApiCall.objects.filter(conversation=conversation, error="").order_by("id"))
    calls = _calls_of(rows, sim.cache.requests, spec, billing)
    for call in calls[billing]:
        if call.prompt != sum(call.block_tokens):
            raise RuntimeError(f"{spec}: a recorded prompt ({call.prompt}) differs from the request")
    compressions = CompressionEvent.objects.filter(conversation=conversation, status="compressed").count()
    price = get_model(MODEL).price
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {"spec": spec, "workload": workload.pattern, "failed_turns": failed, "seconds": seconds}
    for mode, mode_calls in calls.items():
        figures = summarize(mode_calls, price, compressions=compressions)
        figures.update(spec=spec, failed_turns=failed, seconds=seconds)
        out[mode] = {"calls": mode_calls, "figures": figures}
    return out


def same_requests(results: dict[str, dict[str, Any]]) -> bool:
    """True when every strategy of one workload sent the same prompts, call by call."""
    shapes = {tuple(c.prompt for c in r["documented"]["calls"]) for r in results.values()}
    return len(shapes) <= 1


# ---------------------------------------------------------------------------------------- output

def _pauses_line(workload: Workload) -> str:
    pauses = [t.pause for t in workload.turns[1:]]
    over5 = sum(1 for p in pauses if p > 300)
    over60 = sum(1 for p in pauses if p > 3600)
    median = sorted(pauses)[len(pauses) // 2] if pauses else 0
    return (f"{workload.pattern} workload: {len(workload.turns)} turns on {MODEL}, seed {SEEDS[workload.pattern]}; "
            f"{over5} of {len(pauses)} pauses > 5 min ({over60} > 1 h), median {median:.0f} s")


def format_table(results: dict[str, dict[str, Any]], workload: Workload | None = None) -> str:
    """One workload's results: every strategy under both modes side by side."""
    base = {m: results.get(BASELINE, {}).get(m, {}).get("figures") for m in MODES}
    group = f"{'':<18}{'documented (default)':^47}  {'optimistic (1h re-pin promotes)':^32}"
    head = (f"{'strategy':<18}{'input $':>9}{'vs none':>8}{'vs s&3':>8}{'hit':>7}{'write%':>7}{'x limit':>8}  "
            f"{'input $':>9}{'vs s&3':>8}{'hit':>7}{'x limit':>8}  {'compr':>5}{'rewarm':>7}{'total $':>9}")
    lines = [_pauses_line(workload)] if workload is not None else []
    lines += [group, head, "-" * len(head)]
    for spec, res in results.items():
        d, o = res["documented"]["figures"], res["optimistic"]["figures"]

        def vs(f, mode):
            b = base[mode]
            return f"{f['input_cost'] / b['input_cost']:.3f}" if b and b["input_cost"] else "-"

        rw = "-" if d["rewarm_mean"] is None else f"{d['rewarm_mean']:.1f}"
        lines.append(
            f"{spec:<18}{d['input_cost']:>9.4f}{d['relative_to_none']:>8.3f}{vs(d, 'documented'):>8}"
            f"{d['hit_rate']:>7.1%}{d['write_share']:>7.1%}{d['x_lower_bound']:>8.2f}  "
            f"{o['input_cost']:>9.4f}{vs(o, 'optimistic'):>8}{o['hit_rate']:>7.1%}{o['x_lower_bound']:>8.2f}  "
            f"{d['compressions']:>5}{rw:>7}{d['total_cost']:>9.4f}"
        )
    limits = {round(r["documented"]["figures"]["lower_bound"], 6) for r in results.values()}
    limit = ", ".join(f"{x:.4f}" for x in sorted(limits))
    lines.append("")
    lines.append(f"lower bound under the documented rules: ${limit} (every prefix re-sent within 1 h at the hit "
                 "price, every new token once: 5m write price if read back later, else base input)")
    lines.append("same requests for every strategy (prompt tokens, call by call): "
                 + ("yes" if same_requests(results) else "NO"))
    lines.append("input $ = agent calls' billed input; vs none = / the same prompts uncached; hit = read / prompt; "
                 "write% = writes' share of input $;")
    lines.append(f"rewarm = agent calls after a compression until one reads >= {REWARM_HIT_RATE:.0%} of its prompt; "
                 "total $ = agent in+out + summariser (documented).")
    lines.append("")
    for spec, res in results.items():
        f = res["documented"]["figures"]
        lines.append(f"{spec}: {f['agent_calls']} agent calls, {f['summariser_calls']} summariser calls "
                     f"(${f['summariser_cost']:.4f}), failed turns {f['failed_turns']}, rewarm per compression "
                     f"{f['rewarm']}, {f['seconds']:.0f} s")
    return "\n".join(lines)


def verdict(results: dict[str, dict[str, Any]], mode: str = "documented") -> list[str]:
    out = []
    base = results.get(BASELINE, {}).get(mode, {}).get("figures")
    if not base:
        return out
    out.append(f"target system_and_3 <= {TARGET_S3_SHARE:.0%} of no-cache input ({mode}): "
               f"{base['relative_to_none']:.1%} -> {'MET' if base['relative_to_none'] <= TARGET_S3_SHARE else 'MISSED'}")
    others = {s: r[mode]["figures"] for s, r in results.items() if s not in (BASELINE, "none")}
    if others:
        best, f = min(others.items(), key=lambda kv: kv[1]["input_cost"])
        saving = 1 - f["input_cost"] / base["input_cost"]
        ok = saving >= TARGET_BEST_SAVING and f["compressions"] <= base["compressions"] and same_requests(results)
        out.append(f"target best >= {TARGET_BEST_SAVING:.0%} cheaper than system_and_3 ({mode}): {best} "
                   f"{saving:.1%} cheaper, {f['compressions']} vs {base['compressions']} compressions -> "
                   f"{'MET' if ok else 'MISSED'}")
    return out


def _quiet() -> None:
    for name in ("httpx2", "celery", "compression", "sessions"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _light(res: dict[str, Any]) -> dict[str, Any]:
    """A replay's result without the per-call blocks (they are large to send between processes)."""
    out = dict(res)
    for mode in MODES:
        calls = [replace(c, block_tokens=(), block_hashes=()) for c in res[mode]["calls"]]
        out[mode] = {"calls": calls, "figures": res[mode]["figures"]}
    return out


def _replay_in_worker(spec: str, turns: int, pattern: str) -> dict[str, Any]:
    """One strategy on one workload in a fresh process (own throwaway database)."""
    _ensure_django()
    _quiet()
    return _light(replay(spec, build_workload(turns, pattern=pattern)))


def main(turns: int = DEFAULT_TURNS, strategies: Sequence[str] = DEFAULT_STRATEGIES,
         workloads: Sequence[str] = DEFAULT_WORKLOADS, out: Callable[[str], None] | None = print,
         jobs: int = 1) -> dict[str, Any]:
    """Replay each workload once per strategy; print a table per workload (unless ``out`` is None);
    return ``{"results": {workload: {spec: {"documented"/"optimistic": {"calls", "figures"}}}},
    "workloads": {name: Workload}, "seconds": ...}``.

    ``jobs`` > 1 runs the replays in that many worker processes, each with its own throwaway
    database (the replays are independent); ``jobs=1`` runs them here, in this Django setup."""
    started = time.perf_counter()
    loads = {name: build_workload(turns, pattern=name) for name in workloads}
    pairs = [(w, s) for w in workloads for s in strategies]
    if jobs > 1 and len(pairs) > 1:
        import concurrent.futures
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(pairs)), mp_context=ctx) as pool:
            futures = {(w, s): pool.submit(_replay_in_worker, s, turns, w) for w, s in pairs}
            done = {pair: futures[pair].result() for pair in pairs}
    else:
        _ensure_django()
        _quiet()
        done = {(w, s): replay(s, loads[w], progress=out) for w, s in pairs}
    results = {w: {s: done[(w, s)] for s in strategies} for w in workloads}
    seconds = time.perf_counter() - started
    if out:
        for w in workloads:
            out(format_table(results[w], loads[w]))
            for line in verdict(results[w]):
                out(line)
            out("")
        out(f"wall time {seconds:.0f} s")
    return {"results": results, "workloads": loads, "seconds": seconds}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=DEFAULT_TURNS)
    parser.add_argument("--strategies", default=",".join(DEFAULT_STRATEGIES),
                        help="comma-separated strategy names, name@1h for a 1h cache_ttl")
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help=f"comma-separated pause patterns ({', '.join(PAUSE_PATTERNS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="worker processes (each replay runs in its own); 1 = in this process")
    args = parser.parse_args()
    main(turns=args.turns, strategies=[s for s in args.strategies.split(",") if s],
         workloads=[w for w in args.workloads.split(",") if w], jobs=args.jobs)
