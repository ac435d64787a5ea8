"""Cache-aware compaction timing in the independent exam: the pauses between turns and the clock
they are played on, and the settings that turn the timing on.

- ``--timing off|on|both``: each engine played with ``compression.idle_compaction`` off, on, or
  both ways on the same scripts; a run with it on is labelled ``<engine>+timing`` (``lcm+timing``).
  Every run saves the three settings (on or off, the share and horizon at their defaults), so runs
  sharing a database never inherit another's.
- ``--pauses none|<workload>``: ``none`` plays every turn right after the last, on wall time, as
  the exam always has. A workload name (``bench/economics``: steady, bursty, sparse, day, rapid,
  chat) takes that workload's pauses at the exam's seed (the cache-economics benchmark's seed k)
  and as many turns as the script has: one pause before each turn, the first 0. The run then
  starts the simulator on a manual ``simulator.SimClock``, makes the product read the same clock
  (``sessions.services.clock.injected``), and moves it forward by each pause before the turn, so
  a pause of an hour is an hour to the prompt cache and to the timing rules, at no wait.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.economics.workload import WORKLOADS, make_workload

TIMING_CHOICES = ("off", "on", "both")
PAUSE_CHOICES = ("none", *WORKLOADS)
SUFFIX = "+timing"
FIVE_MINUTES, ONE_HOUR = 300.0, 3600.0


def timing_variants(timing: str) -> tuple[bool, ...]:
    """The runs of each engine: without the timing, with it, or both (without first)."""
    return {"off": (False,), "on": (True,), "both": (False, True)}[timing]


def label(engine: str, timed: bool) -> str:
    return engine + SUFFIX if timed else engine


def base_engine(engine_label: str) -> str:
    return engine_label.removesuffix(SUFFIX)


def engine_order(engines: Sequence[str]) -> list[str]:
    """Each engine followed by its ``+timing`` run: the table's order."""
    return [label(e, timed) for e in engines for timed in (False, True)]


def pause_sequence(pauses: str, seed: int, turns: int) -> list[float]:
    """Seconds before each of ``turns`` turns: zeros for ``none``, else the workload's pauses at
    the cache-economics seed ``seed`` (its generators, unchanged)."""
    if pauses == "none":
        return [0.0] * turns
    if pauses not in WORKLOADS:
        raise ValueError(f"unknown pauses {pauses!r}: one of {', '.join(PAUSE_CHOICES)}")
    out = [t.pause for t in make_workload(pauses, seed, turns).turns]
    if len(out) != turns:
        raise RuntimeError(f"{pauses}: {len(out)} pauses for {turns} turns")
    return out


def pause_summary(pauses: Sequence[float]) -> str:
    total = sum(pauses)
    return (f"{len(pauses)} turns over {total / 3600:.1f} h, {sum(p > FIVE_MINUTES for p in pauses)} pauses over 5 min, "
            f"{sum(p > ONE_HOUR for p in pauses)} over 1 h")


def timing_values(on: bool, idle_when: str | None = None) -> dict[str, Any]:
    """The ``compression`` settings of a run with the timing ``on`` or off: the idle rule
    ``idle_when`` (None: the default), the defaults otherwise."""
    from compression.core.compaction_timing import DEFAULT_HORIZON_TURNS, DEFAULT_IDLE_SHARE, DEFAULT_IDLE_WHEN

    return {"idle_compaction": on, "idle_compaction_share": DEFAULT_IDLE_SHARE,
            "idle_compaction_when": idle_when or DEFAULT_IDLE_WHEN, "defer_horizon_turns": DEFAULT_HORIZON_TURNS}


@contextmanager
def timed_stage(engine_name: str, username: str, model: str, *, timing: bool,
                paused: bool, idle_when: str | None = None) -> Iterator[tuple[Any, Any]]:
    """The exam's stage with the timing settings saved; ``paused``: on a manual clock shared by
    the simulator and the product (started at the wall time), yielded with the stage to be moved
    forward by each pause. Without pauses, today's stage on wall time and ``None`` for the clock."""
    from bench.agent_stage import agent_stage
    from compression import settings_store
    from sessions.services import clock
    from simulator import SimClock

    if not paused:
        with agent_stage(engine_name, username, model) as stage:
            settings_store.save_group("compression", timing_values(timing, idle_when))
            yield stage, None
        return
    sim_clock = SimClock(start=time.time())
    with agent_stage(engine_name, username, model, clock=sim_clock) as stage, clock.injected(sim_clock.now):
        settings_store.save_group("compression", timing_values(timing, idle_when))
        yield stage, sim_clock


def cache_note(cfg, conversation) -> str:
    """The prompt cache a run played on: its strategy and longest entry, the pause after which the
    idle rule may compact."""
    from compression.core.caching import prompt_caching_status
    from compression.core.compaction_timing import longest_ttl_seconds

    status = prompt_caching_status(conversation.model, conversation.provider, "")
    ttl = longest_ttl_seconds(enabled=status.enabled, strategy=cfg.caching.strategy, cache_ttl=cfg.caching.cache_ttl)
    longest = "no caching" if not ttl else "1 h" if ttl >= ONE_HOUR else f"{ttl / 60:.0f} min"
    return f"{cfg.caching.strategy} (cache_ttl {cfg.caching.cache_ttl}; longest entry {longest})"


def idle_compactions(conversation) -> int:
    from sessions.models import CompressionEvent

    return CompressionEvent.objects.filter(conversation=conversation, status="compressed", trigger="idle").count()
