import copy

import pytest

from compression.core.assembly import assemble, choose_summary_role, with_system_note
from compression.core.markers import END_MARKER, MERGED_KEY, SUMMARY_KEY, SUMMARY_PREFIX, SYSTEM_NOTE
from compression.core.tool_pairs import STUB_RESULT, sanitize_tool_pairs, tool_pair_problems

from .conftest import assistant, call, result, system, tool_group, user


def roles(msgs):
    return [m["role"] for m in msgs]


@pytest.mark.parametrize(
    ("head_roles", "tail_role", "expected"),
    [
        (["system"], "assistant", ("user", False)),
        (["system"], "user", ("user", True)),  # head = system alone, user tail: merge
        ([], "assistant", ("user", False)),
        (["system", "user", "assistant"], "assistant", ("user", False)),
        (["system", "user", "assistant"], "user", ("user", True)),  # both choices collide
        (["system", "user"], "user", ("assistant", False)),
        (["system", "user"], "assistant", ("assistant", True)),  # both choices collide
        (["system", "assistant", "tool"], "user", ("assistant", False)),  # flipped
        (["system", "assistant", "tool"], "assistant", ("user", False)),
    ],
)
def test_it_chooses_the_summary_role(head_roles, tail_role, expected):
    head = [{"role": r, "content": "x"} for r in head_roles]
    assert choose_summary_role(head, [{"role": tail_role, "content": "y"}]) == expected


def test_it_inserts_a_standalone_summary_with_prefix_and_end_marker():
    msgs = [system(), user("a"), assistant("b"), user("c"), assistant("d"), user("e"), assistant("f")]
    out = assemble(msgs, 3, 4, "## Goal\nwin")
    summary = out[3]
    assert summary["role"] == "user" and summary[SUMMARY_KEY] is True
    assert summary["content"].startswith(SUMMARY_PREFIX)
    assert summary["content"].endswith(END_MARKER)
    assert "## Goal\nwin" in summary["content"]
    assert roles(out) == ["system", "user", "assistant", "user", "assistant", "user", "assistant"]


def test_it_merges_into_a_user_tail_after_a_system_only_head_with_the_end_marker_before_the_message():
    msgs = [system(), user("old"), assistant("old answer"), user("current question"), assistant("reply")]
    out = assemble(msgs, 1, 3, "## Goal\nwin")
    assert roles(out) == ["system", "user", "assistant"]
    merged = out[1]
    assert merged[SUMMARY_KEY] and merged[MERGED_KEY]
    assert merged["content"].startswith(SUMMARY_PREFIX)
    assert merged["content"].endswith(END_MARKER + "\n\ncurrent question")


def test_it_merges_into_list_content_as_a_leading_text_block():
    tail_msg = user([{"type": "text", "text": "look"}, {"type": "image", "source": {"type": "base64", "data": "A"}}])
    out = assemble([system(), user("old"), assistant("x"), tail_msg], 1, 3, "body")
    assert out[1]["content"][0]["text"].startswith(SUMMARY_PREFIX)
    assert out[1]["content"][1:] == tail_msg["content"]


def test_it_appends_the_system_note_once_and_never_the_summary_prefix():
    noted = with_system_note(system("Be brief."))
    assert noted["content"] == "Be brief.\n\n" + SYSTEM_NOTE
    assert with_system_note(noted)["content"].count(SYSTEM_NOTE) == 1
    assert SUMMARY_PREFIX not in SYSTEM_NOTE
    listed = with_system_note(system([{"type": "text", "text": "Be brief."}]))
    assert listed["content"][-1] == {"type": "text", "text": SYSTEM_NOTE}


def test_it_replaces_an_old_merged_summary_kept_in_the_tail():
    msgs = [system(), user("old"), assistant("old answer")]
    first = assemble(msgs + [user("q1"), assistant("a1")], 1, 3, "first summary")
    assert first[1][MERGED_KEY]
    # Second round keeps the merged message (first summary + q1) in the tail.
    out = assemble(first, 1, 1, "second summary")
    carriers = [m for m in out if m.get(SUMMARY_KEY)]
    assert len(carriers) == 1
    assert "second summary" in carriers[0]["content"] and "first summary" not in carriers[0]["content"]
    assert carriers[0]["content"].endswith(END_MARKER + "\n\nq1")


def test_it_stubs_results_whose_calls_survived_and_drops_orphans():
    head = [system(), user("go"), assistant(None, [call("a", "t"), call("b", "t")]), result("a", "1")]
    tail = [result("zzz", "orphan"), user("next"), assistant("ok")]
    out = sanitize_tool_pairs(head + tail)
    assert [m.get("content") for m in out if m["role"] == "tool"] == ["1", STUB_RESULT]
    assert all(m.get("tool_call_id") != "zzz" for m in out)
    assert tool_pair_problems(out) == []


def test_it_puts_results_right_after_their_call_in_call_order():
    msgs = [user("go"), assistant(None, [call("a", "t"), call("b", "t")]), result("b", "2"), user("interrupt"), result("a", "1")]
    out = sanitize_tool_pairs(msgs)
    assert [m.get("tool_call_id") for m in out] == [None, None, "a", "b", None]
    assert tool_pair_problems(out) == []


def test_it_removes_duplicate_results_and_empty_call_lists():
    msgs = [user("go"), *tool_group("a", "t", "1"), result("a", "again"), assistant("x", []), user("end")]
    out = sanitize_tool_pairs(msgs)
    assert [m.get("content") for m in out if m["role"] == "tool"] == ["1"]
    assert "tool_calls" not in out[3]
    assert tool_pair_problems(out) == []


def test_it_sanitises_without_mutating_and_keeps_valid_messages_identical():
    msgs = [user("go"), *tool_group("a", "t", "1"), result("x", "orphan")]
    snapshot = copy.deepcopy(msgs)
    out = sanitize_tool_pairs(msgs)
    assert msgs == snapshot
    assert out[0] is msgs[0] and out[1] is msgs[1] and out[2] is msgs[2]


def test_it_reports_tool_pair_problems():
    assert tool_pair_problems([assistant(None, [call("a", "t")]), user("x")])
    assert tool_pair_problems([user("x"), result("a", "1")])
    assert tool_pair_problems([assistant(None, [call("a", "t"), call("b", "t")]), result("b", "2"), result("a", "1")])
