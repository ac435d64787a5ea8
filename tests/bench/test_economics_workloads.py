"""The cache-economics workloads: seeded, different across seeds, each keeping its own pause rules
and turn mix, their texts read by the simulator's triggers as intended, and steady and bursty
exactly the workloads the benchmark replayed before the others were added."""
from __future__ import annotations

import functools
import hashlib
import json
import statistics

import pytest

from bench.economics.scenarios import NOT_FIRST
from bench.economics.texts import FACTS, SUBJECTS
from bench.economics.workload import SEEDS, WORKLOADS, build_workload, make_workload
from bench.economics.workspace import TOOL_KINDS
from simulator import policy, summary, title

SEEDS_TRIED = (1, 2, 3)  # the seeds the benchmark replays by default with --seeds 3
load = functools.cache(make_workload)  # the tests only read the workloads
EXPECTED_TOOLS = {"read": ["read_file"], "read2": ["read_file", "read_file"], "search": ["search_files"],
                  "list": ["list_files"], "write": ["write_file"]}


def fingerprint(workload) -> str:
    data = {"files": sorted(workload.files.items()), "turns": [[t.text, t.pause, t.kind] for t in workload.turns]}
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


# Computed from the implementation before chat, rapid, sparse and day were added.
BEFORE = {
    ("steady", 160, None): "fd3175fc0e109c5888afb6186baf507d36c5dfa0173f63fa5b6fa8208eac2731",
    ("steady", 30, 7): "d952172b4ff1c9802722e9660b74b0a73e895c9eaa23b58444bfd548a7ae9a76",
    ("bursty", 160, None): "5d87a82a5e17fa252177efb9ebc835a62c6d42ffa595eed9cf47ac8b3dca90d9",
    ("bursty", 30, 7): "bc8c9870cc1962068050168eb7ea75edaf5915849e459f6133decab2d86491b3",
}


@pytest.mark.parametrize(("pattern", "turns", "seed"), list(BEFORE))
def test_steady_and_bursty_are_the_workloads_they_were(pattern, turns, seed):
    assert fingerprint(build_workload(turns, seed=seed, pattern=pattern)) == BEFORE[(pattern, turns, seed)]


def test_seed_one_of_steady_and_bursty_is_their_historical_workload():
    steady = make_workload("steady", 1)
    assert steady == build_workload(pattern="steady") and steady.seed == SEEDS["steady"]
    assert [(t.text, t.pause, t.kind) for t in steady.turns[:3]] == [
        ("read docs/guide_08.md", 0.0, "read"), ("read docs/guide_08.md", 32.1, "read"),
        ("search for quota in data", 33.9, "search")]
    assert make_workload("bursty", 1) == build_workload(pattern="bursty")


@pytest.mark.parametrize("name", WORKLOADS)
def test_each_workload_is_deterministic_per_seed_and_differs_across_seeds(name):
    a = make_workload(name, 1, 60)
    assert a == make_workload(name, 1, 60) and a.pattern == name and len(a.turns) == 60
    b = make_workload(name, 2, 60)
    assert b != a
    assert [t.pause for t in b.turns] != [t.pause for t in a.turns]
    assert [t.text for t in b.turns] != [t.text for t in a.turns]
    assert b.files != a.files
    assert make_workload(name, 1, 61) != a


@pytest.mark.parametrize("name", ("chat", "rapid", "sparse", "day"))
def test_each_new_workload_mixes_kinds_and_starts_with_something_to_follow_up_on(name):
    for seed in SEEDS_TRIED:
        w = load(name, seed)
        kinds = {t.kind for t in w.turns}
        assert len(kinds) >= 5, kinds
        assert w.turns[0].kind not in NOT_FIRST and w.turns[0].pause == 0.0


def test_rapid_pauses_are_all_under_five_minutes_and_spread_inside_that():
    for seed in SEEDS_TRIED:
        pauses = [t.pause for t in load("rapid", seed).turns[1:]]
        assert max(pauses) < 300
        assert min(pauses) < 10 and sum(p > 60 for p in pauses) > len(pauses) / 10


@pytest.mark.parametrize("turns", (160, 40, 12, 3, 2))
def test_most_sparse_pauses_are_from_an_hour_to_a_day(turns):
    for seed in SEEDS_TRIED:
        pauses = [t.pause for t in load("sparse", seed, turns).turns[1:]]
        long = [p for p in pauses if p > 3600]
        assert len(long) >= 0.6 * len(pauses)
        assert all(p <= 24 * 3600 for p in pauses)
        if turns >= 12:
            assert len(long) < len(pauses)  # the rest shorter
            assert any(p > 12 * 3600 for p in long) or turns < 40


def simulator_triggers(text: str) -> list[str]:
    """What the simulator would do with ``text`` besides answering in plain text or by recall."""
    found = [name for name, _ in policy.find_actions(text, set(policy.PROJECT_TOOLS))]
    for name, pattern in (("history search", policy._HISTORY_SEARCH), ("markdown", policy._MARKDOWN_ASK)):
        if pattern.search(text):
            found.append(name)
    for name, pattern in (("call tool", policy._CALL_TOOL), ("repeat", policy._REPEAT)):
        if pattern.match(text.strip()):
            found.append(name)
    if summary.is_compression_prompt(text) or title.is_title_prompt(text):
        found.append("special prompt")
    return found


def test_chat_has_no_tool_triggering_turn_and_long_varied_messages():
    for seed in SEEDS_TRIED:
        w = load("chat", seed)
        assert {t.kind for t in w.turns} <= {"ask", "paste", "follow_up", "recall", "ack"}
        for t in w.turns:
            assert simulator_triggers(t.text) == [], (t.kind, t.text)
        words = [len(t.text.split()) for t in w.turns]
        assert statistics.median(words) >= 60 and max(words) >= 300 and min(words) < 30
        asks = [t for t in w.turns if t.kind in ("ask", "paste")]
        assert sum("\n\n" in t.text for t in asks) >= 0.8 * len(asks)  # several paragraphs


def test_chat_recall_questions_ask_about_subjects_mentioned_earlier():
    w = load("chat", 1)
    recalls = [n for n, t in enumerate(w.turns) if t.kind == "recall"]
    assert recalls
    for n in recalls:
        assert policy._QUESTION.match(w.turns[n].text)
        text = w.turns[n].text
        topic = max((t for t in FACTS if f" {t} " in text), key=len)
        subject = next(s for s in SUBJECTS if s in text)
        stated = (f"{topic} for {subject} is", f"For {subject}, the {topic} is")
        assert any(s in t.text for t in w.turns[:n] for s in stated), text


@pytest.mark.parametrize("name", ("rapid", "sparse", "day"))
def test_tool_turns_call_the_tool_they_ask_for_and_the_others_call_none(name):
    w = load(name, 2)
    assert sum(t.kind in TOOL_KINDS for t in w.turns) > len(w.turns) / 4
    for t in w.turns:
        actions = policy.find_actions(t.text, set(policy.PROJECT_TOOLS))
        assert [a for a, _ in actions] == EXPECTED_TOOLS.get(t.kind, []), (t.kind, t.text)
        for tool, args in actions:
            if tool == "read_file":
                assert args["path"] in w.files
            if tool == "write_file":
                assert args["path"].startswith("notes/note_") and args["path"].endswith(".txt")
        if t.kind not in TOOL_KINDS:
            assert simulator_triggers(t.text) == [], (t.kind, t.text)


@pytest.mark.parametrize("turns", (160, 60, 12, 3))
def test_day_has_its_phases_in_order_with_lunch_and_a_long_break(turns):
    for seed in SEEDS_TRIED:
        w = load("day", seed, turns)
        phases = [t.phase for t in w.turns]
        order = list(dict.fromkeys(phases))
        assert order == ["morning", "afternoon", "evening"]
        assert phases == sorted(phases, key=order.index)  # no phase comes back
        lunch = phases.index("afternoon")
        evening = phases.index("evening")
        assert 45 * 60 <= w.turns[lunch].pause <= 90 * 60
        assert 3 * 3600 <= w.turns[evening].pause <= 6 * 3600
        others = [t.pause for n, t in enumerate(w.turns) if n not in (lunch, evening)]
        assert max(others) < 45 * 60
        assert all(t.pause < 300 for t in w.turns if t.phase == "morning")
        if turns >= 60:
            assert 3 <= phases.count("evening") <= 6
            assert phases.count("morning") > 2 * phases.count("evening")
            afternoon = [t for t in w.turns if t.phase == "afternoon"]
            assert sum(t.kind in TOOL_KINDS for t in afternoon) > len(afternoon) / 2
