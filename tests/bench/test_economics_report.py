"""The cache-economics headline's arithmetic on small hand-made results: dollars per 100 turns,
median and min-max over the seeds, ratios to system_and_3 taken seed by seed, the summary over
workloads, and the same-requests check; and the timing switch being the product's setting."""
from __future__ import annotations

import pytest

from bench.economics.accounting import Call
from bench.economics.report import format_summary, format_workload, spread, summary_rows, workload_rows
from bench.economics.workspace import UserTurn, Workload


def result(total: float, x_limit: float = 1.5, compactions: int = 2, prompts: tuple[int, ...] = (100, 200),
           failed: int = 0, input_cost: float = 0.0, lower_bound: float = 0.0) -> dict:
    calls = [Call("agent", p, 10, 0, 0, 0) for p in prompts]
    figures = {"total_cost": total, "x_lower_bound": x_limit, "compressions": compactions, "failed_turns": failed,
               "input_cost": input_cost, "lower_bound": lower_bound}
    return {"documented": {"calls": calls, "figures": figures}}


# Three seeds of one workload, 200 turns each: system_and_3 and two strategies.
BY_SEED = {
    1: {"system_and_3": result(2.0, 2.0, 2), "cheap": result(1.0, 1.2, 2), "odd": result(4.0, 3.0, 1)},
    2: {"system_and_3": result(4.0, 2.5, 3), "cheap": result(3.0, 1.4, 3), "odd": result(2.0, 1.0, 5)},
    3: {"system_and_3": result(1.0, 1.5, 2), "cheap": result(0.5, 1.1, 4), "odd": result(1.0, 2.0, 2)},
}
TURNS = {1: 200, 2: 200, 3: 200}


def test_spread_is_median_min_max():
    assert spread([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert spread([1.0, 4.0]) == (2.5, 1.0, 4.0)
    assert spread([7.0]) == (7.0, 7.0, 7.0)


def test_rows_give_the_bill_per_100_turns_and_per_seed_ratios():
    rows = workload_rows(BY_SEED, TURNS)
    assert list(rows) == ["system_and_3", "cheap", "odd"]
    # $ per 100 turns: total / 200 turns x 100.
    assert rows["system_and_3"]["per_100"] == (1.0, 0.5, 2.0)
    assert rows["cheap"]["per_100"] == (0.5, 0.25, 1.5)
    # Ratios seed by seed (0.5, 0.75, 0.5), not the ratio of the medians (0.5 / 1.0).
    assert rows["cheap"]["ratio"] == pytest.approx((0.5, 0.5, 0.75))
    assert rows["odd"]["ratio"] == pytest.approx((1.0, 0.5, 2.0))
    assert rows["system_and_3"]["ratio"] == (1.0, 1.0, 1.0)
    assert rows["odd"]["x_limit"] == (2.0, 1.0, 3.0)
    assert rows["cheap"]["compactions"] == 3 and rows["odd"]["compactions"] == 2
    assert rows["cheap"]["failed_turns"] == 0


def test_the_bill_is_per_100_turns_of_each_seeds_workload():
    rows = workload_rows({1: {"system_and_3": result(3.0)}, 2: {"system_and_3": result(3.0)}}, {1: 100, 2: 300})
    assert rows["system_and_3"]["per_100"] == (2.0, 1.0, 3.0)


def test_without_the_baseline_there_is_no_ratio():
    rows = workload_rows({1: {"cheap": result(1.0)}}, {1: 100})
    assert rows["cheap"]["ratio"] is None
    assert summary_rows({"w": rows}) == {}


def test_the_summary_takes_each_workloads_median_ratio_then_their_median_and_the_worst():
    other = {1: {"system_and_3": result(1.0), "cheap": result(0.9), "odd": result(1.3)}}
    third = {1: {"system_and_3": result(1.0), "cheap": result(0.6), "odd": result(0.7)}}
    rows = {"first": workload_rows(BY_SEED, TURNS), "second": workload_rows(other, {1: 100}),
            "third": workload_rows(third, {1: 100})}
    summary = summary_rows(rows)
    # cheap: 0.5 (first), 0.9, 0.6 -> median 0.6, worst 0.9 on "second".
    assert summary["cheap"]["median"] == pytest.approx(0.6)
    assert summary["cheap"]["worst"] == ("second", pytest.approx(0.9))
    # odd: 1.0, 1.3, 0.7 -> median 1.0, worst 1.3.
    assert summary["odd"]["median"] == pytest.approx(1.0) and summary["odd"]["worst"][0] == "second"
    assert summary["system_and_3"]["median"] == 1.0
    text = format_summary(rows)
    assert "0.600" in text and "0.900 second" in text and "summary over 3 workloads" in text


def loads(seeds=(1, 2, 3)) -> dict[int, Workload]:
    turns = [UserTurn("hello", 0.0, "ask"), UserTurn("read README.md", 4000.0, "read")] + [
        UserTurn("thanks", 10.0, "ack")] * 198
    return {s: Workload({}, turns, "fake", 100 + s) for s in seeds}


def test_the_workload_table_prints_median_and_range_and_checks_the_requests():
    text = format_workload("fake", BY_SEED, loads())
    assert "fake: 200 turns" in text and "seeds 1-3" in text
    assert "seed 1 (random seed 101): 1 of 199 pauses > 5 min (1 > 1 h)" in text
    line = next(x for x in text.splitlines() if x.startswith("cheap"))
    assert "0.5000 (0.2500-1.5000)" in line and "0.500 (0.500-0.750)" in line and "1.20 (1.10-1.40)" in line
    assert "same requests for every strategy, seed by seed: yes" in text and "failed turns: none" in text
    differing = {s: dict(runs) for s, runs in BY_SEED.items()}
    differing[2]["odd"] = result(2.0, prompts=(100, 201), failed=1)
    text = format_workload("fake", differing, loads())
    assert "same requests for every strategy, seed by seed: NO (seed 2)" in text and "failed turns: odd 1" in text


def test_runs_with_timing_on_are_checked_among_themselves():
    runs = {1: {"system_and_3": result(1.0), "system_and_3+timing": result(0.8, prompts=(100, 150))}}
    text = format_workload("fake", runs, loads((1,)))
    assert "fake: 200 turns on sim-claude-200k, seed 1\n" in text and "seed by seed: yes" in text
    assert workload_rows(runs, {1: 200})["system_and_3+timing"]["ratio"] == pytest.approx((0.8, 0.8, 0.8))


@pytest.mark.django_db
def test_the_timing_switch_is_the_product_setting_both_ways():
    from bench.economics import replay
    from compression import settings_store

    group, values = replay.TIMING_SETTING
    for on in (False, True):
        settings_store.save_group(group, values[on])
        assert settings_store.current().compression.idle_compaction is on


def test_the_floor_bills_the_same_requests_input_at_its_lower_bound():
    """floor = (whole bill - agent input + the input's lower bound) / the baseline's whole bill:
    no caching strategy bills those requests lower."""
    runs = {1: {"system_and_3": result(10.0, input_cost=8.0, lower_bound=5.0),
                "cheap": result(7.0, input_cost=5.5, lower_bound=5.0)},
            2: {"system_and_3": result(20.0, input_cost=16.0, lower_bound=12.0),
                "cheap": result(15.0, input_cost=12.6, lower_bound=12.0)}}
    rows = workload_rows(runs, {1: 100, 2: 100})
    # seed 1: s&3 (10 - 8 + 5) / 10 = 0.7, cheap (7 - 5.5 + 5) / 10 = 0.65; seed 2: 0.8, 0.72.
    assert rows["system_and_3"]["floor"] == pytest.approx((0.75, 0.7, 0.8))
    assert rows["cheap"]["floor"] == pytest.approx((0.685, 0.65, 0.72))
    other = {1: {"system_and_3": result(10.0, input_cost=8.0, lower_bound=7.0),
                 "cheap": result(9.5, input_cost=7.5, lower_bound=7.0)}}
    summary = summary_rows({"a": rows, "b": workload_rows(other, {1: 100})})
    assert summary["cheap"]["floor_by_workload"] == pytest.approx({"a": 0.685, "b": 0.9})
    assert summary["cheap"]["floor_median"] == pytest.approx((0.685 + 0.9) / 2)
    text = format_summary({"a": rows, "b": workload_rows(other, {1: 100})})
    assert "no caching strategy bills those requests lower" in text
    floor_line = [x for x in text.splitlines() if x.startswith("cheap")][-1]
    assert f"{(0.685 + 0.9) / 2:.3f}" in floor_line and "0.900 b" in floor_line
    table = format_workload("fake", {1: runs[1]}, loads((1,)))
    assert "floor (the same requests, agent input at its lower bound) vs system_and_3: system_and_3 0.700" in table

