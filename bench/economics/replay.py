"""The cache-economics replay: one strategy spec on one workload through the real agent loop
(Celery eager) against an in-process simulator with an injected clock, whose prefix cache records
every request and bills it a second time in the other mode."""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.economics.accounting import MODES, Call, summarize
from bench.economics.workload import MODEL, Workload, make_workload
from compression.core.compaction_timing import DEFAULT_IDLE_WHEN

CALL_SECONDS = 2.0
# Cache-aware compaction timing (``compression.idle_compaction``, a product setting that changes
# when compaction happens): (settings-store group, {False: the values that turn it off, True: those
# that turn it on}). Every replay saves the values of its ``timing``, so replays sharing a database
# do not inherit one. The product reads the replay's simulated clock (``sessions.services.clock``).
TIMING_SETTING: tuple[str, dict[bool, dict[str, Any]]] = (
    "compression", {False: {"idle_compaction": False}, True: {"idle_compaction": True}})


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
           billing: str = "documented", timing: bool = False, idle_when: str | None = None) -> dict[str, Any]:
    """Run the workload for one strategy spec; return, per mode, its calls and figures. The
    simulator bills in ``billing`` mode (what the product records); the other mode's figures come
    from the second cache. ``timing``: with cache-aware compaction timing on (``TIMING_SETTING``);
    ``idle_when``: its idle rule (``compression.idle_compaction_when``; None: the product's default)."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from compression import settings_store
    from hermes_web.celery import app
    from llm.models import get_model
    from sessions.agent.loop import turn_drain
    from sessions.models import ApiCall, CompressionEvent, Conversation
    from sessions.services import clock as product_clock
    from sessions.services.context import session_start
    from sessions.services.turns import turn_submit
    from simulator import SimClock, start_simulator

    rule = (idle_when or DEFAULT_IDLE_WHEN) if timing else None
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
        ), product_clock.injected(clock.now):
            app.conf.task_always_eager = True
            settings_store.save_group("caching", {"strategy": name, "cache_ttl": ttl})
            group, values = TIMING_SETTING
            settings_store.save_group(group, {**values[timing], **({"idle_compaction_when": rule} if rule else {})})
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
    out: dict[str, Any] = {"spec": spec, "workload": workload.pattern, "seed": workload.seed, "timing": timing,
                           "idle_when": rule,
                           "failed_turns": failed, "seconds": seconds}
    for mode, mode_calls in calls.items():
        figures = summarize(mode_calls, price, compressions=compressions)
        figures.update(spec=spec, failed_turns=failed, seconds=seconds)
        out[mode] = {"calls": mode_calls, "figures": figures}
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


def _replay_in_worker(spec: str, turns: int, pattern: str, seed: int = 1, timing: bool = False,
                      idle_when: str | None = None) -> dict[str, Any]:
    """One strategy on one workload (``make_workload``'s seed ``seed``) in a worker process (its own
    throwaway database)."""
    _ensure_django()
    _quiet()
    return _light(replay(spec, make_workload(pattern, seed, turns), timing=timing, idle_when=idle_when))
