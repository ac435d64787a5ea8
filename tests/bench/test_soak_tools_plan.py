"""The tools soak's pure parts: the least-squares slope and the verdict on a process's memory, the
percentiles, the plan of turns per user (two users over their limits, every step phrased as the
simulator's trigger for it), what counts as a refusal, and the report's lines."""
from __future__ import annotations

import json

import pytest

from bench import soak_plan, soak_stats
from bench.soak_parts import Counters, Sample
from simulator.policy import CONTEXT_SEARCH_TOOL, PROJECT_TOOLS, find_actions, respond


def samples_of(mb_per_minute: dict[str, list[float]], every: float = 60.0) -> list[Sample]:
    n = len(next(iter(mb_per_minute.values())))
    return [Sample(i * every, i * 10, {name: int(v[i] * 1024) for name, v in mb_per_minute.items()})
            for i in range(n)]


# --- the slope -----------------------------------------------------------------------------------

def test_the_slope_of_points_on_a_line_is_its_gradient():
    assert soak_stats.least_squares_slope([(0, 5), (1, 7), (2, 9), (3, 11)]) == pytest.approx(2.0)
    assert soak_stats.least_squares_slope([(0, 3), (10, 3)]) == pytest.approx(0.0)


def test_the_slope_is_the_least_squares_one_not_the_end_points():
    # y = x with one high point in the middle: it does not move the fitted line's slope.
    points = [(0, 0), (1, 1), (2, 10), (3, 3), (4, 4)]
    assert soak_stats.least_squares_slope(points) == pytest.approx(1.0)
    points = [(0, 0), (1, 0), (2, 0), (3, 0), (4, 8)]  # a jump at the last sample
    assert soak_stats.least_squares_slope(points) == pytest.approx(1.6)


def test_no_slope_without_two_distinct_times():
    assert soak_stats.least_squares_slope([]) is None
    assert soak_stats.least_squares_slope([(1, 5)]) is None
    assert soak_stats.least_squares_slope([(2, 5), (2, 9)]) is None


def test_the_trend_uses_the_second_half_only_in_mb_per_hour():
    # Two hours sampled every 10 minutes: a jump of 100 MB in the first hour, then +0.1 MB per
    # 10 minutes (0.6 MB an hour) in the second.
    rss = [100 + 10 * i for i in range(7)] + [160 + 0.1 * (i + 1) for i in range(6)]
    samples = samples_of({"worker": rss}, every=600)
    t = soak_stats.trend(samples, "worker")
    assert t.points == 7  # minutes 60..120
    assert t.minutes == pytest.approx(60.0)
    assert t.slope_mb_per_hour == pytest.approx(0.6, abs=0.01)  # RSS is whole KiB
    assert t.change_mb == pytest.approx(0.6, abs=0.01)
    assert soak_stats.verdict(t) == "FLAT"


def test_the_verdict_is_flat_under_ten_mb_an_hour_and_growing_from_there():
    flat = soak_stats.Trend("worker", 5, 60.0, 9.9, 200.0, 209.9)
    growing = soak_stats.Trend("worker", 5, 60.0, 10.0, 200.0, 210.0)
    shrinking = soak_stats.Trend("web", 5, 60.0, -3.0, 160.0, 157.0)
    assert [soak_stats.verdict(t) for t in (flat, growing, shrinking)] == ["FLAT", "GROWING", "FLAT"]
    assert soak_stats.verdict(soak_stats.Trend("worker", 2, 1.0, 1.0, 1.0, 1.0)) == "TOO FEW SAMPLES"
    line = soak_stats.verdict_line(growing)
    assert line.startswith("Celery worker (worker): GROWING: +10.0 MB/hour by least squares over the second half")
    assert "+10.0 MB start to end of that half (200.0 -> 210.0 MB)" in line
    assert soak_stats.verdict_line(shrinking).startswith("Daphne (web): FLAT: -3.0 MB/hour")


def test_percentiles_are_nearest_rank():
    values = list(range(1, 101))  # 1..100
    assert soak_stats.percentile(values, 50) == 50
    assert soak_stats.percentile(values, 95) == 95
    assert soak_stats.percentile([3.0], 95) == 3.0
    assert soak_stats.percentile([5, 1, 4, 2, 3], 50) == 3
    assert soak_stats.percentile([], 50) is None


# --- the plan ------------------------------------------------------------------------------------

def test_the_plan_gives_two_users_limits_and_every_user_conversations():
    plan = soak_plan.plan_per_user(10)
    assert list(plan) == ["soak0", "soak1", "soak2", "soak3"]
    limited = {name for name, p in plan.items() if p["limits"]}
    assert limited == {"soak2", "soak3"}
    assert all(p["limits"]["messages_per_minute"] >= 1 for name, p in plan.items() if name in limited)
    assert sorted(i for p in plan.values() for i in p["conversations"]) == list(range(10))
    assert plan["soak0"]["conversations"] == [0, 4, 8] and plan["soak3"]["conversations"] == [3, 7]
    assert plan["soak2"]["turns_per_cycle"] == dict.fromkeys(soak_plan.STEPS, 2)


def test_the_seed_plan_uses_lcm_on_the_small_simulator_model():
    plan = soak_plan.seed_plan(3, users=2)
    assert (plan["engine"], plan["model"]) == ("lcm", "sim-claude-64k")
    assert [c["user"] for c in plan["conversations"]] == [0, 1, 0]
    json.dumps(plan)  # passed to the seed as JSON


TOOLS = [{"name": n, "input_schema": {"type": "object"}} for n in
         (*PROJECT_TOOLS, CONTEXT_SEARCH_TOOL, "context_expand", "mcp_probe_big", "mcp_probe_echo")]


def called(text: str) -> list[tuple[str, dict]]:
    """The tool calls the simulator makes for this message (docs/simulator.md)."""
    from compression.core.tokens import count_tokens

    reply = respond({"messages": [{"role": "user", "content": text}], "tools": TOOLS, "max_tokens": 500},
                    count_tokens=count_tokens)
    return [(b["name"], b["input"]) for b in reply.blocks if b["type"] == "tool_use"]


def test_every_step_is_the_simulators_trigger_for_its_tool():
    expected = {
        "read": [("read_file", {"path": "notes.txt"})],
        "chat": [],
        "search_files": [("search_files", {"pattern": "TODO", "path": "."})],
        "mcp_big": [("mcp_probe_big", {"size": soak_plan.BIG_RESULT_CHARS})],
        "write": [("write_file", {"path": "status-7.txt",
                                  "content": "status of conversation 3, cycle 7: export checked"})],
        "mcp_echo": [("mcp_probe_echo", {"text": "conversation 3 cycle 7"})],
        "list": [("list_files", {"path": "."})],
        "recall_search": [("context_search", {"query": "the nightly export of conversation 3", "limit": 5})],
        "recall_expand": [("context_expand", {"ref": "m42", "before": 1, "after": 1})],
    }
    assert set(expected) == set(soak_plan.STEPS)
    for step, calls in expected.items():
        text = soak_plan.turn_text(step, conversation=3, cycle=7, ref="m42")
        assert called(text) == calls, (step, text)


def test_the_chat_step_asks_for_its_words_and_states_a_fact():
    text = soak_plan.turn_text("chat", conversation=3, cycle=7, words=25)
    assert text.startswith("reply with 25 words")
    assert "07:49 UTC" in text and "build 3-7" in text
    assert find_actions(text, set(PROJECT_TOOLS)) == []


def test_the_expand_step_waits_for_a_reference():
    assert soak_plan.turn_text("recall_expand", conversation=0, cycle=0) is None
    with pytest.raises(ValueError):
        soak_plan.turn_text("dance", conversation=0, cycle=0)


def test_the_notes_file_is_long_and_holds_todo_lines():
    notes = soak_plan.notes_text(4)
    assert 17_000 < len(notes) <= 18_001 and notes.endswith("\n")
    assert sum(line.startswith("TODO ") for line in notes.splitlines()) >= 20


def test_only_a_limits_422_is_a_refusal():
    body = ("You have sent 2 messages in the last minute, your limit of 2 a minute; you can send again at "
            "14:03:27 UTC.")
    assert soak_plan.is_refusal(422, body)
    assert not soak_plan.is_refusal(422, "The message is empty.")
    assert not soak_plan.is_refusal(500, body)
    assert not soak_plan.is_refusal(200, "")


# --- the report ----------------------------------------------------------------------------------

def test_the_report_counts_refusals_apart_from_failures_and_gives_a_verdict_per_process():
    counters = Counters(done=95, failed=0, refused=12, refused_by_user={"soak2": 7, "soak3": 5},
                        turn_seconds=[0.1 * i for i in range(1, 101)][:95], steps={"read": 11, "chat": 10})
    samples = samples_of({"worker": [200 + i for i in range(9)], "web": [150.0] * 9})
    counts = {"tools": {"read_file": {"calls": 11, "errors": 0}, "context_search": {"calls": 4, "errors": 0},
                        "context_expand": {"calls": 3, "errors": 1}},
              "compressions": [{"status": "compressed", "trigger": "post_response", "n": 5},
                               {"status": "compressed", "trigger": "preflight", "n": 1},
                               {"status": "noop", "trigger": "preflight", "n": 2}],
              "accepted": {"soak0": 50}}
    lines = soak_stats.report_lines(counters=counters, samples=samples, counts=counts, messages=1234)
    text = "\n".join(lines)
    assert lines[0] == "turns: 95 in 8.0 min (95 done, 0 failed)"
    assert lines[1].startswith("failures: 0 (0 turns failed, 0 without an end, 0 sends answered with an error, "
                               "0 compactions failed)")
    assert lines[2] == "refusals (per-user limits, expected): 12 (soak2 7, soak3 5)"
    assert lines[3] == "compactions: 6 (post_response 5, preflight 1)"
    assert "p50 4.80 s, p95 9.10 s, max 9.50 s" in text
    assert "context_expand 3 (1 errors)" in text
    assert "search and expand calls: context_search 4, context_expand 3" in text
    # worker: +1 MB a minute = +60 MB/hour; web: flat.
    assert "Celery worker (worker): GROWING: +60.0 MB/hour" in text
    assert "Daphne (web): FLAT: +0.0 MB/hour" in text


def test_a_failed_compaction_is_a_failure():
    counters = Counters(done=3, timeouts=1, post_errors=1)
    assert soak_stats.failures(counters, compaction_failures=2) == 4
    counts = {"compressions": [{"status": "failed", "trigger": "preflight", "n": 2}]}
    lines = soak_stats.report_lines(counters=counters, samples=samples_of({"worker": [1.0, 1.0], "web": [1.0, 1.0]}),
                                    counts=counts, messages=0)
    assert lines[1].startswith("failures: 4 (0 turns failed, 1 without an end, 1 sends answered with an error, "
                               "2 compactions failed)")


def test_a_sample_row_shows_refusals_and_compactions():
    s = Sample(90.0, 12, {"worker": 204800, "web": None}, compactions=3)
    assert soak_stats.sample_row(s, 4, ("worker", "web")) == (
        f"{1.5:>6.1f}  {12:>6}  {4:>7}  {3:>7}  {'200.0':>12}  {'-':>12}")
    assert soak_stats.sample_header(("worker",)).split() == ["minute", "turns", "refused", "compact", "worker", "MB"]
