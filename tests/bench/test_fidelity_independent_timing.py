"""The independent exam with cache-aware compaction timing (bench/independent_timing.py): its
options, the pauses it plays (a cache-economics workload's, the same for a seed, one per turn),
the one clock the simulator and the product read while it plays, and the table's ``+timing`` rows
and comparison. No exam is played here."""
from __future__ import annotations

import json
import urllib.request

import pytest

from bench import fidelity, independent_timing
from bench import fidelity_independent as exam_bench
from bench.economics.workload import WORKLOADS
from bench.independent_scoring import Run
from bench.independent_table import print_table, rows, timing_lines


def test_the_options_reach_the_independent_exam_and_are_checked():
    args = fidelity.build_parser().parse_args(["--exam", "independent", "--timing", "both", "--pauses", "bursty"])
    assert (args.timing, args.pauses) == ("both", "bursty")
    args = fidelity.build_parser().parse_args(["--exam", "independent"])
    assert (args.timing, args.pauses) == ("off", "none")
    assert set(exam_bench.PAUSE_CHOICES) == {"none", "steady", "bursty", "sparse", "day", "rapid", "chat"}

    for wrong in (["--exam", "independent", "--timing", "sometimes"], ["--exam", "independent", "--pauses", "weekly"],
                  ["--exam", "independent", "--idle-when", "often"],
                  ["--timing", "on"], ["--pauses", "bursty"], ["--idle-when", "at_share"]):  # the fidelity exam has no timing
        with pytest.raises(SystemExit):
            fidelity.main(wrong)
    with pytest.raises(ValueError, match="timing"):
        exam_bench.main(quick=True, timing="sometimes")
    with pytest.raises(ValueError, match="pauses"):
        exam_bench.main(quick=True, pauses="weekly")

    assert independent_timing.timing_variants("off") == (False,)
    assert independent_timing.timing_variants("on") == (True,)
    assert independent_timing.timing_variants("both") == (False, True)
    assert [independent_timing.label("lcm", t) for t in (False, True)] == ["lcm", "lcm+timing"]
    assert independent_timing.base_engine("lcm+timing") == "lcm"
    assert independent_timing.timing_values(True) == {"idle_compaction": True, "idle_compaction_share": 0.70,
                                                      "idle_compaction_when": "due_this_turn",
                                                      "defer_horizon_turns": 3}
    assert independent_timing.timing_values(True, "at_share")["idle_compaction_when"] == "at_share"
    args = fidelity.build_parser().parse_args(["--exam", "independent", "--timing", "on", "--idle-when", "at_share"])
    assert args.idle_when == "at_share"
    assert fidelity.build_parser().parse_args(["--exam", "independent"]).idle_when is None
    assert independent_timing.timing_values(False)["idle_compaction"] is False


def test_the_pauses_are_one_per_turn_and_the_same_for_a_seed():
    """(Each workload's pauses come after its seeded workspace is built: half a second a call.)"""
    exam = exam_bench.load_exam("trip")
    quick = len(exam_bench.build_script(exam, 1, exam_bench.QUICK_PADDING).steps)
    full = len(exam_bench.build_script(exam, 1).steps)
    assert exam_bench.pause_sequence("none", 1, full) == [0.0] * full
    played = {}
    for workload in WORKLOADS:
        pauses = played[workload] = exam_bench.pause_sequence(workload, 1, full)
        assert len(pauses) == full and pauses[0] == 0.0 and all(p > 0 for p in pauses[1:]), workload
    for workload in ("bursty", "day"):  # a pause sampler, and a scenario drawing pauses per phase
        assert exam_bench.pause_sequence(workload, 1, full) == played[workload]
        assert exam_bench.pause_sequence(workload, 2, full) != played[workload]
    assert len(exam_bench.pause_sequence("sparse", 1, quick)) == quick
    # Under bursty the conversation returns after the 5-minute cache expired, more than once.
    assert sum(p > 300 for p in played["bursty"]) >= 2
    assert sum(p > 3600 for p in played["sparse"]) > full // 2
    assert max(played["rapid"]) < 300
    with pytest.raises(ValueError):
        exam_bench.pause_sequence("weekly", 1, quick)


@pytest.mark.django_db
def test_a_paused_stage_runs_the_simulator_and_the_product_on_one_clock():
    from sessions.services import clock, runtime

    with independent_timing.timed_stage("lcm", "timing-stage", exam_bench.MODEL, timing=True,
                                        paused=True) as (stage, sim_clock):
        start = sim_clock.now()
        assert clock.now() == start
        sim_clock.advance(3_600.0)
        assert clock.now() == start + 3_600.0
        with urllib.request.urlopen(f"{stage.simulator_url}/_sim/clock") as reply:
            seen = json.load(reply)
        assert seen["manual"] and seen["now"] == start + 3_600.0
        cfg = runtime.current_config()
        assert cfg.compression.idle_compaction and cfg.compression.idle_compaction_share == 0.70
        one_hour = cfg.caching.cache_ttl == "1h" or cfg.caching.strategy in {"rolling_1h", "warm_anchor", "stable_prefix"}
        expected = "1 h" if one_hour else "5 min"
        assert independent_timing.cache_note(cfg, stage.conversation) == (
            f"{cfg.caching.strategy} (cache_ttl {cfg.caching.cache_ttl}; longest entry {expected})")
    assert clock.now() < start + 3_000.0  # wall time again

    with independent_timing.timed_stage("lcm", "timing-stage", exam_bench.MODEL, timing=False,
                                        paused=False) as (stage, sim_clock):
        assert sim_clock is None
        assert runtime.current_config().compression.idle_compaction is False


def _run(engine: str, seed: int, closed: list[bool], *, searched: bool = True) -> Run:
    n = len(closed)
    return Run(shape="trip", engine=engine, seed=seed, searched=searched, turns=41, failed_turns=0, compactions=3,
               context_tokens=10_000, uncompacted_tokens=60_000, anchors=10, indexed=True, fact_bearing=5,
               exam_value=6, facts=[f"f{i}" for i in range(n)], kinds=["number"] * n, closed=closed,
               open_subject=[True] * n, open_other=[c or i % 2 == 0 for i, c in enumerate(closed)],
               live=[False] * n, causes=["" if c else "dropped" for c in closed])


def test_the_table_has_timing_rows_and_compares_recall_per_engine_and_seed(capsys):
    t, f = True, False
    runs = [_run("lcm+timing", 1, [t, t, t, f]), _run("lcm", 1, [t, t, f, f]), _run("lcm", 2, [t, f, f, f]),
            _run("lcm+timing", 2, [t, t, f, f]), _run("compressor", 1, [f, f, f, f], searched=False),
            _run("compressor+timing", 1, [t, f, f, f], searched=False)]
    idle = {("trip", "lcm+timing", 1): 2, ("trip", "lcm+timing", 2): 1, ("trip", "compressor+timing", 1): 3,
            ("trip", "lcm", 1): 0, ("trip", "lcm", 2): 0, ("trip", "compressor", 1): 0}

    assert [r.engine for r in rows(runs)] == ["compressor", "compressor+timing", "lcm", "lcm+timing"]
    assert timing_lines(runs, idle) == [
        "compressor → compressor+timing, median over the seeds: closed-book 0.0 → 25.0 (+25.0)",
        "  seed 1: closed-book 0.0 → 25.0 (+25.0)",
        "  idle compactions of compressor+timing (all conversations), per seed: seed 1: 3",
        "lcm → lcm+timing, median over the seeds: closed-book 37.5 → 62.5 (+25.0); "
        "open (subject) 100.0 → 100.0 (+0.0); open (other) 62.5 → 75.0 (+12.5)",
        "  seed 1: closed-book 50.0 → 75.0 (+25.0); open (subject) 100.0 → 100.0 (+0.0); "
        "open (other) 75.0 → 75.0 (+0.0)",
        "  seed 2: closed-book 25.0 → 50.0 (+25.0); open (subject) 100.0 → 100.0 (+0.0); "
        "open (other) 50.0 → 75.0 (+25.0)",
        "  idle compactions of lcm+timing (all conversations), per seed: seed 1: 2, seed 2: 1",
    ]
    assert timing_lines([r for r in runs if "+timing" not in r.engine], idle) == []  # nothing to compare

    print_table(runs, idle=idle, pauses=["Pauses before the turns: the cache-economics 'bursty' workload's"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    table = [line for line in lines if line.startswith("trip ")]
    assert [line.split()[1] for line in table] == ["compressor", "compressor+timing", "lcm", "lcm+timing"]
    lcm_row, timed_row = table[2], table[3]
    assert timed_row.startswith("trip         lcm+timing             4  62.5 (50.0–75.0)")
    assert lcm_row.startswith("trip         lcm                    4  37.5 (25.0–50.0)")
    assert len(lcm_row) == len(timed_row)  # the same columns
    assert "Pauses before the turns: the cache-economics 'bursty' workload's" in lines
    assert "Cache-aware compaction timing, recall without → with it" in out
    for line in timing_lines(runs, idle):
        assert line in lines
    for engine in ("lcm", "lcm+timing"):
        assert f"Target {engine} closed-book ≥ 70%" in out
        assert f"{engine} closed-book misses per kind of fact" in out
