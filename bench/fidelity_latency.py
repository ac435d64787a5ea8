"""What the lcm engine's recall tools cost a turn at 20,000 archived messages, on SQLite and on
PostgreSQL: each call goes through the engine a turn builds (``runtime.engine_build``) and the
real recall service and index, JSON encoding included; the model's own time is not counted.

A conversation is given 20,000 archived messages (an ended session, as rotation leaves them)
written from the fidelity conversations' sentences and facts, then 60 turns each make one
``context_search`` (a fact's question) and one ``context_expand`` of its best hit. PostgreSQL
runs in a child process against a throwaway database created on the server given (and dropped).

Run alone: DATABASE_URL=... .venv/bin/python -m bench.fidelity_latency --messages 20000
"""
from __future__ import annotations

import argparse
import atexit
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = 20_000
TURNS = 60
BATCH = 1_000


def ensure_django(prefix: str = "hermes-recall-bench-") -> None:
    """Configure Django for a standalone run: a throwaway SQLite database unless DATABASE_URL is set."""
    import django
    from django.apps import apps

    if apps.ready:
        return
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    shm = Path("/dev/shm")
    data_dir = tempfile.mkdtemp(prefix=prefix, dir=str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None)
    atexit.register(shutil.rmtree, data_dir, ignore_errors=True)
    os.environ["HERMES_DATA_DIR"] = data_dir
    os.environ["HERMES_CELERY_EAGER"] = "true"
    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    # Broadcasts (a settings change, a pushed message) stay in this process: no Redis is running.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

    from sessions.services.recall import index_ensure_after_migrate

    call_command("migrate", verbosity=0)
    index_ensure_after_migrate(using="default")  # what the post_migrate receiver does


def quiet() -> None:
    for name in ("httpx2", "httpx", "celery", "compression", "sessions"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _archive(n: int):
    """A conversation with ``n`` archived messages and a short live context; (conversation, questions)."""
    from django.contrib.auth import get_user_model

    from bench.fidelity_conversations import SHAPES, build_conversation
    from sessions.models import Conversation, Message, Session
    from sessions.services.context import SYSTEM_PROMPT, message_append

    rng = random.Random(20261201)
    convs = [build_conversation(shape) for shape in SHAPES]
    facts = [f for c in convs for f in c.facts]
    user = get_user_model().objects.create_user(f"recall-bench-{uuid.uuid4().hex[:8]}")
    conversation = Conversation.objects.create(owner=user, provider="simulator", model="sim-claude-64k")
    old = Session.objects.create(conversation=conversation, system_prompt=SYSTEM_PROMPT)
    rows, seq = [], 0
    for i in range(n):
        shape = list(SHAPES)[i % len(SHAPES)]
        padding = SHAPES[shape][3]
        words = " ".join(padding(rng, "note") for _ in range(rng.randint(2, 8)))
        if i % 40 == 0:
            words = f"{words} {rng.choice(facts).carrier}"
        rows.append(Message(conversation=conversation, session=old, seq=seq, role=("user", "assistant")[i % 2],
                            content=words, token_count=len(words) // 4, archived=True))
        seq += 1
        if len(rows) == BATCH:
            Message.objects.bulk_create(rows)
            rows = []
    if rows:
        Message.objects.bulk_create(rows)
    old.ended_at, old.end_reason = old.started_at, "compression"
    old.save(update_fields=["ended_at", "end_reason"])
    live = Session.objects.create(conversation=conversation, parent=old, system_prompt=SYSTEM_PROMPT)
    message_append(session=live, role="user", content="summary of the earlier turns", visible=True, is_summary=True)
    message_append(session=live, role="assistant", content="Continuing from the summary.")
    from django.db import connection

    with connection.cursor() as cursor:  # the planner statistics a database in use has (autovacuum)
        cursor.execute("ANALYZE")
    return conversation, [f.question for f in facts]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(backend: str, n: int = MESSAGES, turns: int = TURNS) -> dict[str, Any]:
    """Search and expand timings (ms) through the engine, with the archive's build time."""
    from django.test import override_settings

    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        return _measure(backend, n, turns)


def _measure(backend: str, n: int, turns: int) -> dict[str, Any]:
    from compression import settings_store
    from sessions.services import runtime
    from sessions.services.context import session_active

    settings_store.save_group("context", {"engine": "lcm"})
    started = time.perf_counter()
    conversation, questions = _archive(n)
    built = time.perf_counter() - started
    cfg = runtime.current_config()
    search, expand, both, hits = [], [], [], 0
    for k in range(turns + 1):
        engine = runtime.engine_build(conversation=conversation, session=session_active(conversation), cfg=cfg)
        t0 = time.perf_counter()
        found = json.loads(engine.handle_tool_call("context_search", {"query": questions[k % len(questions)],
                                                                      "limit": 5}))
        t1 = time.perf_counter()
        results = found.get("results") or []
        ref = results[0]["ref"] if results else "m1"
        json.loads(engine.handle_tool_call("context_expand", {"ref": ref, "before": 2, "after": 2}))
        t2 = time.perf_counter()
        if k == 0:
            continue  # the first call of a process checks the index objects
        hits += bool(results)
        search.append((t1 - t0) * 1000)
        expand.append((t2 - t1) * 1000)
        both.append((t2 - t0) * 1000)
    return {"backend": backend, "messages": n, "build_s": built, "turns": turns, "hits": hits,
            "load": os.getloadavg()[0], "cores": os.cpu_count(),
            "search_p50": statistics.median(search), "search_p95": _percentile(search, 0.95),
            "expand_p50": statistics.median(expand), "expand_p95": _percentile(expand, 0.95),
            "both_p50": statistics.median(both), "both_p95": _percentile(both, 0.95)}


def measure_in_process(n: int) -> dict[str, Any]:
    from django.db import connection

    return measure("PostgreSQL" if connection.vendor == "postgresql" else "SQLite", n)


def measure_postgres(admin_url: str, n: int) -> dict[str, Any]:
    """The same measurement in a child process on a throwaway PostgreSQL database."""
    try:
        import psycopg

        name = f"hermes_fidelity_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(_libpq(admin_url), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # no server, no rights: the table says so
        return {"backend": "PostgreSQL", "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    try:
        env = {**os.environ, "DATABASE_URL": url}
        env.pop("HERMES_DATA_DIR", None)
        out = subprocess.run([sys.executable, "-m", "bench.fidelity_latency", "--messages", str(n), "--json"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            return {"backend": "PostgreSQL", "error": (out.stderr.strip().splitlines() or ["failed"])[-1]}
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        with psycopg.connect(_libpq(admin_url), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _libpq(url: str) -> str:
    return url.replace("postgres://", "postgresql://", 1)


def print_latency(results: list[dict[str, Any]]) -> None:
    if not results:
        return
    n = max(r.get("messages", 0) for r in results)
    print(f"\nRecall tools at {n:,} archived messages (ms, p50 / p95; {TURNS} turns, each one search and one expand)")
    for r in results:
        if "error" in r:
            print(f"  {r['backend']:<10} not measured: {r['error']}")
            continue
        print(f"  {r['backend']:<10} context_search {r['search_p50']:6.1f} / {r['search_p95']:6.1f}   "
              f"context_expand {r['expand_p50']:6.1f} / {r['expand_p95']:6.1f}   both {r['both_p50']:6.1f} / "
              f"{r['both_p95']:6.1f}   ({r['hits']}/{r['turns']} searches found something; archive built in "
              f"{r['build_s']:.0f} s; load average {r['load']:.1f} on {r['cores']} cores)")
    measured = [r for r in results if "error" not in r]
    if measured:
        worst = max(r["both_p50"] for r in measured)
        print(f"Target ≤ 50 ms p50 added to a turn: {'met' if worst <= 50 else 'NOT met'} (worst {worst:.1f} ms)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="recall tool latency on this process's database")
    parser.add_argument("--messages", type=int, default=MESSAGES)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    ensure_django()
    quiet()
    result = measure_in_process(args.messages)
    print(json.dumps(result) if args.json else result)


if __name__ == "__main__":
    main()
