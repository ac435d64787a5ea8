"""Where each cache strategy puts its breakpoints (SPEC §8, §13.2): which messages/tools carry a
marker, with which TTL, never more than 4, never a 1h marker after a 5m one. Pure, no Django."""
from __future__ import annotations

import copy
import random

import pytest

from compression.core.cache_strategies import previous_request_end, summary_index
from compression.core.caching import (
    MAX_BREAKPOINTS,
    CachedRequest,
    apply_cache_strategy,
    available_cache_strategies,
    count_breakpoints,
    marker_ttls,
    register_cache_strategy,
    ttl_order_ok,
)
from compression.core.config import known_strategies
from llm.convert import to_anthropic_request
from simulator import blocks

from .conftest import assistant, call, result, system, user

M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}},
    {"name": "list_files", "description": "List files.", "parameters": {"type": "object", "properties": {}}},
]
NEW = ("rolling_1h", "warm_anchor", "stable_prefix", "tools_and_3")


@pytest.fixture(autouse=True)
def _registry(monkeypatch):
    """Strategies registered by a test do not outlive it."""
    from compression.core import caching

    monkeypatch.setattr(caching, "_STRATEGIES", dict(caching._STRATEGIES))
    monkeypatch.setattr(caching, "_TAKES_HINTS", set(caching._TAKES_HINTS))


def summary(text: str = "[CONTEXT COMPACTION — REFERENCE ONLY] earlier turns") -> dict:
    return {**user(text), "_compressed_summary": True}


def convo() -> list[dict]:
    """0 system, 1 summary, 2 user, 3 assistant+call, 4 tool, 5 assistant text, 6 user (newest)."""
    return [
        system("sys"),
        summary(),
        user("read x.py"),
        assistant("I'll use read_file x.py.", [call("a", "read_file", path="x.py")]),
        result("a", "file body"),
        assistant("x.py: 1 line"),
        user("and now?"),
    ]


def marks(res: CachedRequest) -> dict:
    """{message index or 'tools.N': ttl} of every marker in the result."""
    out = {}
    for i, t in enumerate(res.tools or ()):
        if "cache_control" in t:
            out[f"tools.{i}"] = t["cache_control"].get("ttl", "5m")
    for i, m in enumerate(res.messages):
        found = [m["cache_control"]] if "cache_control" in m else []
        if isinstance(m.get("content"), list):
            found += [p["cache_control"] for p in m["content"] if isinstance(p, dict) and "cache_control" in p]
        assert len(found) <= 1, f"message {i} carries {len(found)} markers"
        if found:
            out[i] = found[0].get("ttl", "5m")
    return out


def test_the_new_strategies_are_registered_and_valid_settings():
    assert set(NEW) <= set(available_cache_strategies())
    assert set(NEW) | {"none", "system_and_3"} <= set(known_strategies())


def test_the_helpers_find_the_summary_and_the_previous_request():
    msgs = convo()
    assert summary_index(msgs) == 1
    assert previous_request_end(msgs) == 4  # the tool result came right before the newest answer
    assert previous_request_end([system("s"), user("hi")]) is None
    assert previous_request_end([system("s"), assistant("hello"), user("hi")]) is None


# ---------------------------------------------------------------- rolling_1h

def tool_step(*results) -> list[dict]:
    """0 system, 1 user, 2 assistant text, 3 user (this turn), 4 assistant + calls, 5.. tool results."""
    calls = [call(cid, "read_file", path=cid) for cid, _ in results]
    return [system("sys " * 1000), user("u0"), assistant("a0"), user("read x"),
            assistant("I'll use read_file.", calls)] + [result(cid, body) for cid, body in results]


def test_rolling_1h_after_tool_results_marks_the_reply_1h_and_the_results_at_the_configured_ttl():
    res = apply_cache_strategy(tool_step(("a", "body a"), ("b", "body b")), "rolling_1h", tools=TOOLS)
    assert marks(res) == {0: "1h", 4: "1h", 5: "5m", 6: "5m"}
    assert res.breakpoints == 4 and res.strategy == "rolling_1h"
    assert res.messages[4]["content"] == [{"type": "text", "text": "I'll use read_file.", "cache_control": H1}]


def test_rolling_1h_on_a_turns_first_call_places_what_system_and_3_places():
    # The user's pause came right before: the cache may be cold, and 1h past the read would bill
    # the whole rewritten prefix at 1h.
    res = apply_cache_strategy(convo(), "rolling_1h")
    assert marks(res) == marks(apply_cache_strategy(convo(), "system_and_3")) == {0: "5m", 4: "5m", 5: "5m", 6: "5m"}
    assert res.strategy == "rolling_1h"


def chat_turn() -> list[dict]:
    """0 system, 1 user, 2 assistant (the previous turn's reply), 3 user (this turn's message)."""
    return [system("sys " * 1000), user("tell me about caching " * 20), assistant("Caching keeps a prefix."),
            user("and how long does it live? " * 10)]


def test_rolling_1h_on_a_turns_first_call_after_a_short_pause_marks_the_previous_reply_1h():
    # The caller knows the previous call's 5m entries still live (hint warm): the new tokens are the
    # previous reply and this message, so 1h on the reply costs only the reply, and a chat turn,
    # which calls no tool, keeps a 1h entry over the conversation for a longer pause next.
    res = apply_cache_strategy(chat_turn(), "rolling_1h", hints={"warm": True})
    assert marks(res) == {0: "1h", 2: "1h", 3: "5m"}
    cold = apply_cache_strategy(chat_turn(), "rolling_1h", hints={"warm": False})
    assert marks(cold) == marks(apply_cache_strategy(chat_turn(), "system_and_3"))


def test_rolling_1h_right_after_a_compression_places_what_system_and_3_places():
    msgs = tool_step(("a", "body"))
    res = apply_cache_strategy(msgs, "rolling_1h", hints={"after_compression": True})
    assert marks(res) == {0: "5m", 3: "5m", 4: "5m", 5: "5m"}


def test_rolling_1h_leaves_a_long_reply_at_the_configured_ttl():
    msgs = tool_step(("a", "body"))
    msgs[4]["content"] = "word " * 400  # far more than a tenth of the prefix before it
    assert marks(apply_cache_strategy(msgs, "rolling_1h")) == {0: "5m", 3: "5m", 4: "5m", 5: "5m"}


def test_rolling_1h_with_a_1h_ttl_marks_everything_1h():
    res = apply_cache_strategy(tool_step(("a", "body")), "rolling_1h", cache_ttl="1h")
    assert marks(res) == {0: "1h", 4: "1h", 5: "1h"}


def test_rolling_1h_on_openrouter_skips_a_bare_tool_call_turn():
    msgs = tool_step(("a", "body"))
    msgs[4]["content"] = None  # a bare tool-call turn ignores envelope markers there
    res = apply_cache_strategy(msgs, "rolling_1h", native_anthropic=False)
    assert marks(res) == {0: "5m", 2: "5m", 3: "5m", 5: "5m"}


# ---------------------------------------------------------------- warm_anchor

def test_warm_anchor_pins_system_summary_and_the_previous_request_at_1h():
    res = apply_cache_strategy(convo(), "warm_anchor", tools=TOOLS)
    assert marks(res) == {0: "1h", 1: "1h", 4: "1h", 6: "5m"}
    assert res.breakpoints == 4 and res.strategy == "warm_anchor"
    out = res.messages
    assert out[4]["cache_control"] == H1  # native tool message: message level
    assert out[6]["content"] == [{"type": "text", "text": "and now?", "cache_control": M5}]
    assert out[1]["content"][0]["cache_control"] == H1 and out[1]["_compressed_summary"] is True
    assert all("cache_control" not in t for t in res.tools)


def test_warm_anchor_uses_the_configured_ttl_for_the_newest_message():
    res = apply_cache_strategy(convo(), "warm_anchor", cache_ttl="1h")
    assert marks(res) == {0: "1h", 1: "1h", 4: "1h", 6: "1h"}


def test_warm_anchor_right_after_a_compression_does_not_write_the_rebuilt_context_at_1h():
    res = apply_cache_strategy(convo(), "warm_anchor", hints={"after_compression": True})
    assert marks(res) == {0: "1h", 1: "1h", 4: "5m", 6: "5m"}


def test_warm_anchor_within_a_tool_loop_anchors_the_users_message():
    msgs = [system("sys"), user("u0"), assistant("a0"), user("read x"),
            assistant("I'll use read_file x.", [call("a", "read_file", path="x")]), result("a", "body")]
    res = apply_cache_strategy(msgs, "warm_anchor")
    assert marks(res) == {0: "1h", 3: "1h", 5: "5m"}  # no summary: three breakpoints


def test_warm_anchor_first_call_has_no_anchor():
    res = apply_cache_strategy([system("sys"), user("hello")], "warm_anchor")
    assert marks(res) == {0: "1h", 1: "5m"}


def test_warm_anchor_skips_the_summary_when_the_anchor_is_the_summary():
    msgs = [system("sys"), summary(), assistant("ok"), user("next")]
    res = apply_cache_strategy(msgs, "warm_anchor")
    assert marks(res) == {0: "1h", 1: "1h", 3: "5m"}


def test_warm_anchor_on_openrouter_moves_the_anchor_off_an_empty_tool_result():
    msgs = [system("sys"), user("u"), assistant(None, [call("a", "t")]), result("a", ""), assistant("done"),
            user("next")]
    res = apply_cache_strategy(msgs, "warm_anchor", native_anthropic=False)
    # The empty tool result and the bare tool-call turn cannot carry a marker there: "u" is the anchor.
    assert marks(res) == {0: "1h", 1: "1h", 5: "5m"}


# ---------------------------------------------------------------- stable_prefix

def test_stable_prefix_pins_system_and_summary_and_marks_the_last_two():
    res = apply_cache_strategy(convo(), "stable_prefix", tools=TOOLS)
    assert marks(res) == {0: "1h", 1: "1h", 5: "5m", 6: "5m"}


def test_stable_prefix_without_a_summary_marks_the_last_three():
    msgs = [m for m in convo() if not m.get("_compressed_summary")]
    res = apply_cache_strategy(msgs, "stable_prefix")
    assert marks(res) == {0: "1h", 3: "5m", 4: "5m", 5: "5m"}


def test_stable_prefix_treats_a_summary_merged_into_the_newest_message_as_the_tail():
    msgs = [system("sys"), summary("[CONTEXT COMPACTION] ... then: continue")]
    res = apply_cache_strategy(msgs, "stable_prefix")
    assert marks(res) == {0: "1h", 1: "5m"}


# ---------------------------------------------------------------- tools_and_3

def test_tools_and_3_marks_the_last_tool_schema_and_the_last_three_messages():
    res = apply_cache_strategy(convo(), "tools_and_3", tools=TOOLS)
    assert marks(res) == {"tools.1": "5m", 4: "5m", 5: "5m", 6: "5m"}
    assert "cache_control" not in res.tools[0]


def test_tools_and_3_without_tools_falls_back_to_the_system_prompt():
    res = apply_cache_strategy(convo(), "tools_and_3", cache_ttl="1h")
    assert marks(res) == {0: "1h", 4: "1h", 5: "1h", 6: "1h"}


# ---------------------------------------------------------------- common guarantees

def test_hints_reach_only_strategies_that_take_them():
    seen = {}

    def plain(messages, *, marker, native_anthropic, tools):
        return CachedRequest(messages, tools, 0, "plain")

    def hinted(messages, *, marker, native_anthropic, tools, hints=None):
        seen.update(hints)
        return CachedRequest(messages, tools, 0, "hinted")

    register_cache_strategy("test_plain", plain)
    register_cache_strategy("test_hinted", hinted)
    assert apply_cache_strategy(convo(), "test_plain", hints={"after_compression": True}).strategy == "plain"
    apply_cache_strategy(convo(), "test_hinted", hints={"after_compression": True})
    assert seen == {"after_compression": True}


def test_a_strategy_that_puts_1h_after_5m_is_refused():
    def backwards(messages, *, marker, native_anthropic, tools):
        messages[0]["cache_control"] = dict(M5)
        messages[-1]["cache_control"] = dict(H1)
        return CachedRequest(messages, tools, 2, "backwards")

    register_cache_strategy("test_backwards", backwards)
    with pytest.raises(RuntimeError, match="1h breakpoint after a 5m"):
        apply_cache_strategy(convo(), "test_backwards")


def test_marker_ttls_read_tools_then_system_then_messages():
    msgs = [user("u"), system("s")]
    msgs[0]["cache_control"] = dict(H1)
    msgs[1]["cache_control"] = dict(M5)
    assert marker_ttls(msgs) == ["5m", "1h"]  # system first, whatever its list position
    assert not ttl_order_ok(msgs)
    assert marker_ttls([user("u")], [{"name": "t", "cache_control": H1}]) == ["1h"]


def random_conversation(rng: random.Random) -> list[dict]:
    msgs: list[dict] = [system("sys " * rng.randint(1, 5))] if rng.random() < 0.9 else []
    if rng.random() < 0.5:
        msgs.append(summary())
    for t in range(rng.randint(0, 8)):
        msgs.append(user(f"u{t}" if rng.random() < 0.9 else ""))
        for c in range(rng.randint(0, 2)):
            cid = f"c{t}_{c}"
            msgs.append(assistant(rng.choice([None, "", "calling"]), [call(cid, "read_file", path="x")]))
            msgs.append(result(cid, rng.choice(["", "body", [{"type": "text", "text": "part"}]])))
        if rng.random() < 0.8:
            msgs.append(assistant(rng.choice(["done", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]])))
    msgs.append(user("newest"))
    return msgs


@pytest.mark.parametrize("strategy", ("none", "system_and_3") + NEW)
@pytest.mark.parametrize("native", (True, False))
@pytest.mark.parametrize("ttl", ("5m", "1h"))
def test_every_strategy_keeps_the_api_rules_on_random_conversations(strategy, native, ttl):
    rng = random.Random(f"{strategy}-{native}-{ttl}")
    for _ in range(60):
        msgs = random_conversation(rng)
        snapshot = copy.deepcopy(msgs)
        hints = {"after_compression": rng.random() < 0.3}
        res = apply_cache_strategy(msgs, strategy, cache_ttl=ttl, native_anthropic=native, tools=TOOLS, hints=hints)
        assert msgs == snapshot  # never mutates
        assert count_breakpoints(res.messages, res.tools) <= MAX_BREAKPOINTS
        assert ttl_order_ok(res.messages, res.tools)
        if ttl == "1h":
            assert set(marker_ttls(res.messages, res.tools)) <= {"1h"}
        # As the API sees it after conversion: at most 4 markers, 1h never after 5m.
        if native:
            body = to_anthropic_request(res.messages, model="claude-sonnet-4-5", max_tokens=10, tools=res.tools)
            found = blocks.markers(body)
            assert len(found) <= MAX_BREAKPOINTS
            ttls = [m.ttl for m in sorted(found, key=lambda m: m.block_index)]
            assert "1h" not in ttls[ttls.index("5m"):] if "5m" in ttls else True
