import copy
import json

import pytest

from compression.core.pruning import (
    DUPLICATE_PLACEHOLDER,
    SCREENSHOT_PLACEHOLDER,
    prune_boundary,
    prune_old_tool_results,
    summarize_tool_result,
    truncate_tool_arguments,
)

from .conftest import assistant, call, result, sized, tool_group, user

LONG = "x" * 500


@pytest.mark.parametrize(
    ("tool", "args", "content", "expected"),
    [
        (
            "terminal",
            {"command": "npm test"},
            '{"exit_code": 0, "output": "' + "ok\\n" * 10 + '"}\n' + "line\n" * 46,
            "[terminal] ran `npm test` -> exit 0, 47 lines output",
        ),
        ("terminal", {"command": "make"}, "no code here\nsecond", "[terminal] ran `make` -> exit ?, 2 lines output"),
        ("read_file", {"path": "config.py"}, "c" * 3400, "[read_file] read config.py from line 1 (3,400 chars)"),
        ("read_file", {"path": "app.py", "offset": 120, "limit": 50}, "c" * 250, "[read_file] read app.py from line 120 (250 chars)"),
        ("write_file", {"path": "app.py", "content": "l\n" * 119 + "l"}, "ok", "[write_file] wrote to app.py (120 lines)"),
        ("list_files", {"path": "src"}, "a.py\nb.py\n\nc.py\n", "[list_files] listed src -> 3 entries"),
        ("list_files", {}, json.dumps({"entries": ["a", "b"]}), "[list_files] listed . -> 2 entries"),
        (
            "search_files",
            {"pattern": "TODO", "path": "src"},
            json.dumps({"total_count": 12, "matches": []}),
            "[search_files] content search for 'TODO' in src -> 12 matches",
        ),
        ("search_files", {"pattern": "x"}, "a.py:1:x\nb.py:2:x", "[search_files] content search for 'x' in . -> 2 matches"),
        ("web_search", {"query": "q" * 60, "limit": 5, "third": 1}, "r" * 1234, f"[web_search] query={'q' * 37}... limit=5 (1,234 chars result)"),
        ("mystery", {}, "r" * 10, "[mystery] (10 chars result)"),
    ],
)
def test_it_writes_informative_one_liners(tool, args, content, expected):
    assert summarize_tool_result(tool, json.dumps(args), content) == expected


def test_it_shortens_long_terminal_commands_to_80_chars():
    line = summarize_tool_result("terminal", {"command": "echo " + "a" * 200}, "out")
    assert line.startswith("[terminal] ran `echo aaa")
    assert len(line.split("`")[1]) == 80
    assert line.split("`")[1].endswith("...")


def test_it_survives_unparseable_arguments():
    assert summarize_tool_result("read_file", "{not json", "abc") == "[read_file] read ? from line 1 (3 chars)"


def test_it_keeps_truncated_arguments_valid_json_and_cuts_only_long_leaves():
    args = json.dumps({"path": "a.py", "content": "é" * 900, "n": 3, "nested": [{"deep": "z" * 300}], "flag": True})
    out = truncate_tool_arguments(args)
    parsed = json.loads(out)
    assert parsed["path"] == "a.py"
    assert parsed["content"] == "é" * 200 + "...[truncated]"
    assert parsed["nested"][0]["deep"] == "z" * 200 + "...[truncated]"
    assert parsed["n"] == 3 and parsed["flag"] is True


def test_it_leaves_short_and_invalid_arguments_untouched():
    short = json.dumps({"content": "y" * 300})
    assert truncate_tool_arguments(short) == short
    broken = '{"content": "' + "y" * 900
    assert truncate_tool_arguments(broken) == broken


def test_it_deduplicates_identical_results_keeping_the_newest_even_in_the_tail():
    msgs = [user("go")]
    for i in range(3):
        msgs += tool_group(f"c{i}", "read_file", LONG, path="same.py")
    out, pruned = prune_old_tool_results(msgs, protect_tail_count=100, protect_tail_tokens=None)
    contents = [m["content"] for m in out if m["role"] == "tool"]
    assert contents == [DUPLICATE_PLACEHOLDER, DUPLICATE_PLACEHOLDER, LONG]
    assert pruned == 2


def test_it_does_not_deduplicate_short_results():
    msgs = [user("go")] + tool_group("a", "terminal", "ok" * 50, command="x") + tool_group("b", "terminal", "ok" * 50, command="x")
    out, pruned = prune_old_tool_results(msgs, 100, None)
    assert pruned == 0 and out == msgs


def test_it_summarises_old_results_and_protects_the_tail():
    msgs = [user("go")]
    for i in range(5):
        msgs += tool_group(f"c{i}", "read_file", f"{i}" * 300, path=f"f{i}.py")
    out, pruned = prune_old_tool_results(msgs, protect_tail_count=4, protect_tail_tokens=None)
    tools = [m["content"] for m in out if m["role"] == "tool"]
    assert tools[:3] == [f"[read_file] read f{i}.py from line 1 (300 chars)" for i in range(3)]
    assert tools[3:] == ["3" * 300, "4" * 300]
    assert pruned == 3


def test_it_strips_base64_images_from_old_tool_results():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 50_000}}
    url_image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "B" * 50_000}}
    msgs = [user("shot")] + tool_group("s", "browser", [{"type": "text", "text": "page"}, image, url_image]) + [user("next")] * 3
    out, pruned = prune_old_tool_results(msgs, protect_tail_count=3, protect_tail_tokens=None)
    assert out[2]["content"] == [
        {"type": "text", "text": "page"},
        {"type": "text", "text": SCREENSHOT_PLACEHOLDER},
        {"type": "text", "text": SCREENSHOT_PLACEHOLDER},
    ]
    assert "A" * 100 not in json.dumps(out)
    assert pruned == 1


def test_it_truncates_old_call_arguments_but_not_in_the_tail():
    big = {"path": "a.py", "content": "w" * 2000}
    old = assistant(None, [call("w1", "write_file", **big)])
    new = assistant(None, [call("w2", "write_file", **big)])
    msgs = [user("go"), old, result("w1", "ok"), user("again"), new, result("w2", "ok")]
    out, _ = prune_old_tool_results(msgs, protect_tail_count=3, protect_tail_tokens=None)
    old_args = json.loads(out[1]["tool_calls"][0]["function"]["arguments"])
    assert old_args["content"].endswith("...[truncated]")
    assert out[4] is msgs[4]


def test_it_never_mutates_its_input_and_keeps_unchanged_messages_identical():
    msgs = [user("go")] + tool_group("a", "read_file", LONG, path="x") + [user("u")] * 5
    snapshot = copy.deepcopy(msgs)
    out, _ = prune_old_tool_results(msgs, 3, None)
    assert msgs == snapshot
    assert out[0] is msgs[0]
    assert out[2] is not msgs[2]


def test_it_drops_a_stale_stored_count_from_changed_messages():
    msgs = [user("go")] + [tool_group("a", "read_file", LONG, path="x")[0], sized(result("a", LONG, "read_file"), 125)] + [user("u")] * 5
    out, _ = prune_old_tool_results(msgs, 3, None)
    assert "_tokens" not in out[2]


def test_it_walks_the_tail_budget_with_the_count_as_a_floor():
    msgs = [sized(user(str(i)), 100) for i in range(10)]
    assert prune_boundary(msgs, protect_tail_count=2, protect_tail_tokens=450, token_counter=lambda m: m["_tokens"]) == 6
    assert prune_boundary(msgs, protect_tail_count=8, protect_tail_tokens=450, token_counter=lambda m: m["_tokens"]) == 2
    assert prune_boundary(msgs, protect_tail_count=3, protect_tail_tokens=None, token_counter=lambda m: 1) == 7
