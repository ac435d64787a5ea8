"""The cache-economics benchmark's accounting against hand-computed dollars, its two workloads, and
tiny replays end to end through the real agent loop and an in-process simulator, in both modes."""
from __future__ import annotations

import pytest

from bench import cache_economics as ce
from llm.models import get_model

PRICE = get_model(ce.MODEL).price  # USD per million tokens


def per_m(tokens: float, usd_per_million: float) -> float:
    return tokens * usd_per_million / 1_000_000


def three_turns() -> list[ce.Call]:
    """Turn 1 (t=0): one call, blocks a=2000, b=500, all written (5m).
    Turn 2 (t=30): one call, reads a+b, writes c=1000 (5m).
    A compression: the summariser's call (3000 in, 400 out, no caching).
    Turn 3 after a 6-minute pause (t=400, 402): two calls on the rebuilt context s=800, t=1200:
    the first writes both at 1h, the second reads them and writes d=300 (5m)."""
    return [
        ce.Call("agent", 0, 100, 0, 2500, 0, 0.0, (2000, 500), ("a", "ab")),
        ce.Call("agent", 0, 50, 2500, 1000, 0, 30.0, (2000, 500, 1000), ("a", "ab", "abc")),
        ce.Call("compression", 3000, 400, 0, 0, 0, 31.0, (3000,), ("summary-prompt",)),
        ce.Call("agent", 0, 60, 0, 0, 2000, 400.0, (800, 1200), ("s", "st")),
        ce.Call("agent", 0, 40, 2000, 300, 0, 402.0, (800, 1200, 300), ("s", "st", "std")),
    ]


def test_the_accounting_matches_a_hand_computed_three_turn_example():
    f = ce.summarize(three_turns(), PRICE)
    # Billed input of the agent calls: writes at 1.25x / 2x, reads at 0.1x (the price table).
    billed = (per_m(2500, PRICE.cache_write_5m)
              + per_m(2500, PRICE.cache_read) + per_m(1000, PRICE.cache_write_5m)
              + per_m(2000, PRICE.cache_write_1h)
              + per_m(2000, PRICE.cache_read) + per_m(300, PRICE.cache_write_5m))
    assert billed == pytest.approx(0.0276)  # Sonnet-class prices: 3 / 3.75 / 6 / 0.30 per M
    assert f["input_cost"] == pytest.approx(billed)
    no_cache = per_m(2500 + 3500 + 2000 + 2300, PRICE.input)
    assert f["no_cache_input_cost"] == pytest.approx(no_cache) == pytest.approx(0.0309)
    assert f["relative_to_none"] == pytest.approx(billed / no_cache)
    assert f["hit_rate"] == pytest.approx((2500 + 2000) / 10300)
    writes = per_m(2500 + 1000 + 300, PRICE.cache_write_5m) + per_m(2000, PRICE.cache_write_1h)
    assert f["write_share"] == pytest.approx(writes / billed)
    summariser = per_m(3000, PRICE.input) + per_m(400, PRICE.output)
    assert f["summariser_cost"] == pytest.approx(summariser)
    assert f["total_cost"] == pytest.approx(billed + per_m(100 + 50 + 60 + 40, PRICE.output) + summariser)
    assert f["total_cost"] == pytest.approx(0.04635)
    # Lower bound: a+b new and read back later (5m write price); a+b read; c never read again
    # (base price); s+t new and read back; s+t read; d never read again.
    limit = (per_m(2500, PRICE.cache_write_5m)
             + per_m(2500, PRICE.cache_read) + per_m(1000, PRICE.input)
             + per_m(2000, PRICE.cache_write_5m)
             + per_m(2000, PRICE.cache_read) + per_m(300, PRICE.input))
    assert f["lower_bound"] == pytest.approx(limit) == pytest.approx(0.022125)
    assert f["x_lower_bound"] == pytest.approx(billed / limit)
    # After the compression: the first call misses, the second reads 2000 of 2300 tokens.
    assert f["rewarm"] == [2] and f["rewarm_mean"] == 2
    assert (f["agent_calls"], f["summariser_calls"], f["compressions"]) == (4, 1, 1)


def test_the_lower_bound_forgets_a_prefix_not_sent_for_more_than_an_hour():
    calls = [
        ce.Call("agent", 0, 1, 0, 0, 0, 0.0, (1000,), ("a",)),
        ce.Call("agent", 0, 1, 0, 0, 0, 3_500.0, (1000, 10), ("a", "ab")),  # within the hour: read
        ce.Call("agent", 0, 1, 0, 0, 0, 7_200.0, (1000, 10, 10), ("a", "ab", "abc")),  # 62 min later: new
    ]
    expected = (per_m(1000, PRICE.cache_write_5m)  # a: read back by the second call
                + per_m(1000, PRICE.cache_read) + per_m(10, PRICE.input)
                + per_m(1020, PRICE.input))  # all new again, and never read afterwards
    assert ce.lower_bound(calls, PRICE) == pytest.approx(expected)


def test_rewarm_counts_calls_until_the_hit_rate_is_back_and_none_when_it_never_is():
    calls = [
        ce.Call("compression", 10, 1, 0, 0, 0),
        ce.Call("agent", 0, 1, 0, 1000, 0),
        ce.Call("agent", 0, 1, 400, 600, 0),  # 40 %: not yet
        ce.Call("agent", 0, 1, 900, 100, 0),  # 90 %
        ce.Call("compression", 10, 1, 0, 0, 0),
        ce.Call("agent", 5, 1, 0, 0, 0),
    ]
    assert ce.rewarm_counts(calls) == [3, None]


@pytest.mark.parametrize("pattern", ce.PAUSE_PATTERNS)
def test_each_workload_is_seeded_tool_heavy_and_has_long_pauses(pattern):
    a, b = ce.build_workload(pattern=pattern), ce.build_workload(pattern=pattern)
    assert a == b and len(a.turns) >= 150 and a.pattern == pattern
    pauses = [t.pause for t in a.turns[1:]]
    assert any(p > 3600 for p in pauses) and sorted(pauses)[len(pauses) // 2] < 90
    kinds = {t.kind for t in a.turns}
    assert {"read", "search", "list", "write", "question", "chat"} <= kinds
    assert sum(t.kind.startswith("read") for t in a.turns) > len(a.turns) / 3
    assert max(len(text) for text in a.files.values()) > 20_000  # some reads hit the tools' output cap
    assert ce.build_workload(seed=1, pattern=pattern) != a


def test_the_bursty_pattern_has_more_long_breaks_than_the_steady_one():
    def long_breaks(pattern, seconds):
        return sum(t.pause > seconds for t in ce.build_workload(pattern=pattern).turns)

    assert long_breaks("bursty", 3600) > 2 * long_breaks("steady", 3600)
    assert long_breaks("bursty", 300) > long_breaks("steady", 300)


@pytest.mark.django_db(transaction=True)
def test_a_tiny_replay_runs_every_strategy_through_the_agent_loop_in_both_modes():
    specs = ["none", "system_and_3", "warm_anchor@1h", "stable_prefix", "rolling_1h"]
    run = ce.main(turns=5, strategies=specs, workloads=["steady"], out=None)
    results = run["results"]["steady"]
    res = {spec: r["documented"]["figures"] for spec, r in results.items()}
    assert all(f["failed_turns"] == 0 for f in res.values())
    assert len({f["agent_calls"] for f in res.values()}) == 1 and res["none"]["agent_calls"] >= 5
    assert ce.same_requests(results)  # the same replay, whatever the markers
    assert len({round(f["lower_bound"], 9) for f in res.values()}) == 1
    none = res["none"]
    assert none["hit_rate"] == 0 and none["relative_to_none"] == pytest.approx(1.0)
    assert res["system_and_3"]["input_cost"] < none["input_cost"]
    assert res["system_and_3"]["hit_rate"] > 0.5
    assert res["warm_anchor@1h"]["cache_write_1h"] > 0 and res["warm_anchor@1h"]["cache_write_5m"] == 0
    for r in results.values():
        for mode in ce.MODES:
            assert r[mode]["figures"]["input_cost"] >= r[mode]["figures"]["lower_bound"] - 1e-12
    # The documented figures come from the recorded calls: recompute one from them.
    calls = results["system_and_3"]["documented"]["calls"]
    assert res["system_and_3"]["input_cost"] == pytest.approx(
        sum(ce.input_cost(c, PRICE) for c in calls if c.purpose == "agent"))
    table = ce.format_table(results, run["workloads"]["steady"])
    assert "rolling_1h" in table and "optimistic" in table and "same requests for every strategy" in table


PAUSED = ce.Workload(ce.build_workload(turns=1).files, [
    ce.UserTurn("read README.md", 0.0, "read"),
    ce.UserTurn("thanks. reply with 40 words", 20.0, "chat"),
    ce.UserTurn("read README.md", 900.0, "read"),  # past every 5m entry
    ce.UserTurn("list files", 30.0, "list"),
])


@pytest.mark.django_db(transaction=True)
def test_the_second_cache_gives_what_billing_in_that_mode_gives():
    """The optimistic columns come from a second cache fed the same requests: billing the replay in
    optimistic mode instead gives the same figures for both modes (the requests do not depend on it)."""
    ce._quiet()
    by_documented = ce.replay("warm_anchor", PAUSED)
    by_optimistic = ce.replay("warm_anchor", PAUSED, billing="optimistic")
    for mode in ce.MODES:
        a = [(c.input, c.cache_read, c.cache_write_5m, c.cache_write_1h) for c in by_documented[mode]["calls"]]
        b = [(c.input, c.cache_read, c.cache_write_5m, c.cache_write_1h) for c in by_optimistic[mode]["calls"]]
        assert a == b
    # And the pause is one where the readings differ, so the comparison can fail.
    assert by_documented["optimistic"]["figures"]["input_cost"] < by_documented["documented"]["figures"]["input_cost"]


@pytest.mark.django_db(transaction=True)
def test_a_timed_replay_saves_the_idle_rule_it_was_given():
    from bench.economics.replay import replay
    from sessions.services import runtime

    given = replay("rolling_1h", PAUSED, timing=True, idle_when="at_share")
    assert given["idle_when"] == "at_share"
    assert runtime.current_config().compression.idle_compaction_when == "at_share"
    default = replay("rolling_1h", PAUSED, timing=True)
    assert default["idle_when"] == "due_this_turn"
    assert runtime.current_config().compression.idle_compaction_when == "due_this_turn"
    assert replay("rolling_1h", PAUSED)["idle_when"] is None
    assert runtime.current_config().compression.idle_compaction is False

