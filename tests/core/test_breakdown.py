"""Where the context goes: each kind's number, the exact split of a reported total, the largest items."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compression.core.breakdown import Part, context_breakdown, kind_slug, tools_label
from compression.core.markers import SUMMARY_KEY, wrap_summary
from compression.core.tokens import (
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    RunningTotal,
    compute_message_tokens,
    count_tokens,
)

from .conftest import assistant, call, result, sized, system, user

REPO = Path(__file__).resolve().parents[2]
OV = MESSAGE_OVERHEAD_TOKENS
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 300}}
# tools_text of this schema is "hello world": 2 tokens with cl100k_base.
TOOL = {"name": "hello", "description": " world"}
COUNTED = ("system", "summary", "messages", "tool_results", "images", "other")


def split(messages, **kwargs: Any):
    kwargs.setdefault("tools_by_source", {})
    kwargs.setdefault("window", 100_000)
    return context_breakdown(messages, **kwargs)


def kinds(b) -> list[str]:
    return [p.kind for p in b.parts]


def counted_sum(b) -> int:
    return sum(p.tokens for p in b.parts if p.kind in COUNTED or p.kind.startswith("tools:"))


def test_the_tool_schema_used_below_is_two_tokens():
    assert count_tokens("hello world") == 2


def test_the_system_prompt_is_its_stored_count_plus_the_overhead():
    b = split([sized(system(), 100), sized(user("hi"), 20)])
    assert b.tokens("system") == 104
    assert b.parts[0] == Part("system", "System prompt", 104, pct=0.1, x=0.0)


def test_each_tool_source_is_its_own_part_in_the_mapping_order_and_an_empty_source_is_left_out():
    tools = {"built-in": [TOOL, TOOL, TOOL], "context engine": [TOOL], "mcp:empty": [], "mcp:time": [TOOL, TOOL]}
    b = split([sized(system(), 10)], tools_by_source=tools)
    assert [(p.kind, p.label, p.tokens) for p in b.parts if p.kind.startswith("tools:")] == [
        ("tools:built-in", "Tools · built-in", 6),
        ("tools:context engine", "Tools · context engine", 2),
        ("tools:mcp:time", "Tools · MCP time", 4),
    ]
    assert kinds(b) == ["system", "tools:built-in", "tools:context engine", "tools:mcp:time", "free"]


def test_a_tool_counts_its_name_description_and_json_parameters():
    schema = {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object"}}
    b = split([], tools_by_source={"built-in": [schema]})
    assert b.tokens("tools:built-in") == count_tokens('read_fileRead a file.{"type": "object"}')


def test_a_summary_message_counts_as_summary_whatever_its_role():
    summary = sized({"role": "user", "content": wrap_summary("## Goal\nShip it."), SUMMARY_KEY: True}, 300)
    b = split([sized(system(), 10), summary, sized(user("next"), 20)])
    assert b.tokens("summary") == 304
    assert b.tokens("messages") == 24
    assert [p.label for p in b.parts if p.kind == "summary"] == ["Summary and anchor index"]


def test_user_and_assistant_messages_include_their_tool_call_envelopes():
    with_calls = assistant(None, [call("c1", "read_file", path="a.py")])
    b = split([sized(user("hi"), 20), sized(assistant("ok"), 30), with_calls])
    assert b.tokens("messages") == 24 + 34 + compute_message_tokens(with_calls) + OV
    assert compute_message_tokens(with_calls) > 10  # the envelope is counted, not just the (empty) text


def test_tool_results_are_their_own_part():
    b = split([sized(result("c1", "x", "read_file"), 500), sized(result("c2", "y", "terminal"), 700)])
    assert b.tokens("tool_results") == 1208
    assert b.tokens("messages") == 0
    assert kinds(b) == ["tool_results", "free"]


def test_images_are_taken_out_of_their_message_so_nothing_is_counted_twice():
    picture = sized(user([{"type": "text", "text": "look"}, IMAGE, IMAGE]), 2 * IMAGE_TOKENS + 12)
    screenshot = sized(result("c1", [{"type": "tool_result", "content": [IMAGE]}], "browser"), IMAGE_TOKENS + 40)
    b = split([picture, screenshot])
    assert b.tokens("images") == 3 * IMAGE_TOKENS
    assert b.tokens("messages") == 12 + OV
    assert b.tokens("tool_results") == 40 + OV
    assert b.total == 3 * IMAGE_TOKENS + 52 + 2 * OV


def test_a_stored_count_smaller_than_its_images_never_goes_negative():
    b = split([sized(user([IMAGE]), 100)])
    assert b.tokens("images") == 100
    assert b.tokens("messages") == OV


def test_the_output_reserve_is_its_own_part_and_never_scaled():
    b = split([sized(user("hi"), 96)], window=10_000, output_reserve=1_000, total=500)
    assert b.tokens("output_reserve") == 1_000
    assert b.tokens("messages") == 500
    assert kinds(b) == ["messages", "output_reserve", "free"]
    assert [p.label for p in b.parts if p.kind == "output_reserve"] == ["Reserved for the reply"]


def test_free_space_is_what_the_window_leaves_and_never_negative():
    b = split([sized(user("hi"), 496)], window=10_000, output_reserve=1_000)
    assert b.parts[-1] == Part("free", "Free space", 8_500, pct=85.0, x=15.0)
    over = split([sized(user("hi"), 496)], window=10_000, output_reserve=1_000, total=9_500)
    assert over.parts[-1].kind == "free" and over.parts[-1].tokens == 0
    assert sum(p.tokens for p in over.parts) == 10_500


def test_without_a_reported_total_the_counted_sum_is_shown_unscaled():
    b = split([sized(system(), 96), sized(user("hi"), 296)], window=1_000)
    assert (b.total, b.counted, b.estimated, b.scale) == (400, 400, False, 1.0)
    assert [(p.kind, p.tokens, p.pct, p.x) for p in b.parts] == [
        ("system", 100, 10.0, 0.0), ("messages", 300, 30.0, 10.0), ("free", 600, 60.0, 40.0)]


def test_a_reported_total_scales_the_counted_kinds_exactly():
    b = split([sized(system(), 96), sized(user("hi"), 296)], window=2_000, total=1_000)
    assert (b.total, b.counted, b.estimated, b.scale) == (1_000, 400, True, 2.5)
    assert [(p.kind, p.tokens) for p in b.parts] == [("system", 250), ("messages", 750), ("free", 1_000)]


def test_the_largest_remainder_gives_the_spare_tokens_to_the_biggest_fractions_first():
    three = [sized(system(), 96), sized(user("a"), 96), sized(result("c", "r"), 96)]
    assert [p.tokens for p in split(three, total=1_000).parts[:3]] == [334, 333, 333]
    uneven = [sized(system(), 26), sized(user("a"), 16), sized(result("c", "r"), 6)]  # 30, 20, 10 counted
    assert [p.tokens for p in split(uneven, total=100).parts[:3]] == [50, 33, 17]  # 50, 33.33, 16.67


def test_the_counted_size_of_a_message_is_the_engines(make_compressor):
    messages = [system(), user("hello there"), assistant(None, [call("c1", "read_file", path="a.py")]),
                result("c1", "print('hi')\n" * 30, "read_file"), sized(assistant("Done."), 7)]
    assert split(messages).total == make_compressor().count_messages_tokens(messages) == RunningTotal()(messages)


def test_it_imports_no_framework_in_a_fresh_interpreter():
    code = "import sys, compression.core.breakdown\nprint(sorted(m for m in sys.modules if m.split('.')[0] in "
    code += "{'django', 'sessions', 'llm', 'simulator', 'staff', 'hermes_web'}))"
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def random_conversation(rng: random.Random) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [sized(system(), rng.randint(0, 5_000))]
    for i in range(rng.randint(0, 30)):
        role = rng.choice(["user", "assistant", "tool", "summary", "image"])
        if role == "tool":
            msg = result(f"c{i}", "out", rng.choice(["read_file", "terminal"]))
        elif role == "summary":
            msg = {"role": "user", "content": wrap_summary("body"), SUMMARY_KEY: True}
        elif role == "image":
            msg = user([{"type": "text", "text": "see"}, IMAGE])
        else:
            msg = {"role": role, "content": "words " * rng.randint(0, 50)}
        if role == "image":
            msgs.append(sized(msg, IMAGE_TOKENS + rng.randint(0, 500)))
        else:
            msgs.append(sized(msg, rng.randint(0, 20_000)) if rng.random() < 0.8 else msg)
    return msgs


@pytest.mark.parametrize("seed", range(25))
def test_the_parts_always_add_up_to_the_shown_total_and_the_whole(seed):
    rng = random.Random(seed)
    messages = random_conversation(rng)
    tools = {"built-in": [TOOL] * rng.randint(0, 5), "mcp:time": [TOOL] * rng.randint(0, 3)}
    window = rng.choice([0, 8_000, 64_000, 200_000])
    reserve = rng.choice([0, 4_096, 32_000])
    total = rng.choice([None, 0, rng.randint(1, 300_000)])
    b = context_breakdown(messages, tools_by_source=tools, window=window, output_reserve=reserve, total=total)
    unscaled = sum(compute_message_tokens(m) if "_tokens" not in m else m["_tokens"] for m in messages)
    assert b.counted == unscaled + OV * len(messages) + 2 * sum(len(v) for v in tools.values())
    assert b.total == (total or b.counted)
    assert counted_sum(b) == b.total
    assert sum(p.tokens for p in b.parts) == max(window, b.total + reserve)
    assert b.estimated is bool(total)
    assert b.parts[-1].kind == "free"
    assert [p.x for p in b.parts] == sorted(p.x for p in b.parts)
    assert all(0 <= p.x <= 100 and 0 <= p.pct <= 100 for p in b.parts)
    assert all(p.tokens > 0 for p in b.parts[:-1])


def test_the_largest_items_are_single_messages_biggest_first_never_the_system_prompt():
    messages = [
        sized(system(), 50_000),
        sized(user("first question"), 100),
        sized(assistant(None, [call("c1", "read_file", path="a.py")]), 60),
        sized({"role": "tool", "tool_call_id": "c1", "content": "file body"}, 900),  # named by the call it answers
        sized({"role": "assistant", "content": wrap_summary("## Goal\n  Ship   it."), SUMMARY_KEY: True}, 400),
        sized(assistant("an answer"), 100),
        sized(user("tiny"), 1),
    ]
    b = split(messages, largest_n=4)
    assert [(i.index, i.kind, i.label, i.tokens) for i in b.largest] == [
        (3, "tool_results", "Tool result · read_file", 904),
        (4, "summary", "Summary", 404),
        (1, "messages", "User message", 104),
        (5, "messages", "Assistant message", 104),  # a tie keeps the conversation's order
    ]
    assert b.largest[1].preview == "## Goal Ship it."
    assert [i.ref for i in b.largest] == [None] * 4
    assert len(split(messages).largest) == 5
    assert split(messages, largest_n=0).largest == ()


def test_largest_items_are_scaled_by_the_same_factor_and_carry_their_refs():
    messages = [sized(system(), 96), sized(user("a"), 296), sized(result("c", "r", "terminal"), 596)]
    b = split(messages, total=2_500, refs=["s", 41, 42])  # counted 1,000: scale 2.5
    assert b.scale == 2.5
    assert [(i.ref, i.label, i.tokens) for i in b.largest] == [(42, "Tool result · terminal", 1_500),
                                                                (41, "User message", 750)]
    rounded = split([sized(user("a"), 1), sized(user("b"), 2)], total=10)  # counted 11
    assert [i.tokens for i in rounded.largest] == [5, 5]  # 6 × 10/11 = 5.45, 5 × 10/11 = 4.55
    assert sum(p.tokens for p in rounded.parts if p.kind == "messages") == 10


def test_a_preview_collapses_whitespace_and_is_cut_near_80_characters():
    long = user("word\n\n   " * 40)
    b = split([long, assistant(None, [call("c9", "terminal", cmd="ls")])])
    preview = b.largest[0].preview
    assert len(preview) == 80 and preview.endswith("…") and "  " not in preview and "\n" not in preview
    assert b.largest[1].preview == 'terminal({"cmd": "ls"})'


def test_it_never_raises_on_malformed_input():
    messages = [None, 5, "text", {"role": "user", "content": None}, {"content": "no role", "_tokens": -3},
                {"role": "assistant", "content": None, "tool_calls": [None, {"id": "x"}]},
                {"role": "tool", "content": [None, 3, {"type": "text"}]}]
    b = context_breakdown(messages, tools_by_source={"built-in": [None, TOOL, "x"], "bad": None},  # type: ignore[dict-item]
                          window=-5, output_reserve=-1, total=-10, refs=[1], largest_n=-2)
    assert b.window == 0 and b.output_reserve == 0 and not b.estimated and b.largest == ()
    no_role = compute_message_tokens({"content": "no role"})
    assert b.tokens("tools:built-in") == 2
    assert b.total == counted_sum(b) == b.counted
    assert b.tokens("messages") >= no_role + 4 * OV
    for odd in (float("nan"), float("inf"), "12", True):
        assert context_breakdown([], tools_by_source=None, window=odd, total=odd).parts == (  # type: ignore[arg-type]
            Part("free", "Free space", 0),)
    assert split([sized(user("a"), 6)], refs=[]).largest[0].ref is None


def test_a_reported_total_with_nothing_counted_is_shown_as_not_broken_down():
    b = split([], window=1_000, total=300)
    assert [(p.kind, p.label, p.tokens) for p in b.parts] == [("other", "Not broken down", 300), ("free", "Free space", 700)]
    assert not b.estimated


def test_kind_slugs_are_css_safe():
    assert kind_slug("tools:mcp:time") == "tools-mcp-time"
    assert kind_slug("tools:context engine") == "tools-context-engine"
    assert kind_slug("output_reserve") == "output-reserve"
    assert Part("tool_results", "Tool results", 1).slug == "tool-results"
    assert tools_label("mcp:time") == "Tools · MCP time"
