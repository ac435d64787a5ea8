import copy

import pytest

from compression.core.caching import (
    MAX_BREAKPOINTS,
    apply_cache_strategy,
    available_cache_strategies,
    count_breakpoints,
    prompt_caching_status,
    register_cache_strategy,
)

from .conftest import assistant, call, result, system, user

M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}


def apply_anthropic_cache_control(messages, cache_ttl="5m", native_anthropic=True):
    """SPEC §8's system_and_3 placement, as the registry applies it."""
    return apply_cache_strategy(messages, "system_and_3", cache_ttl, native_anthropic).messages


def convo():
    return [
        system("sys"),
        user("u1"),
        assistant(None, [call("a", "read_file", path="x")]),
        result("a", "file body"),
        assistant([{"type": "text", "text": "t1"}, {"type": "text", "text": "t2"}]),
        user("u2"),
    ]


def test_it_marks_the_system_prompt_and_the_last_three_messages():
    out = apply_anthropic_cache_control(convo())
    assert out[0]["content"] == [{"type": "text", "text": "sys", "cache_control": M5}]
    assert out[1]["content"] == "u1" and "cache_control" not in out[2]  # not among the last three
    assert out[3]["cache_control"] == M5  # native tool message: message level
    assert out[4]["content"][-1]["cache_control"] == M5 and "cache_control" not in out[4]["content"][0]
    assert out[5]["content"] == [{"type": "text", "text": "u2", "cache_control": M5}]
    assert count_breakpoints(out) == 4


def test_it_marks_empty_content_at_message_level():
    msgs = [system("sys"), user("u"), assistant(None, [call("a", "t")]), result("a", "r")]
    out = apply_anthropic_cache_control(msgs)
    assert out[2]["cache_control"] == M5 and out[2]["content"] is None
    assert out[1]["content"][0]["cache_control"] == M5


def test_it_never_mutates_and_uses_the_1h_marker():
    msgs = convo()
    snapshot = copy.deepcopy(msgs)
    out = apply_anthropic_cache_control(msgs, cache_ttl="1h")
    assert msgs == snapshot
    assert out[-1]["content"][0]["cache_control"] == H1


@pytest.mark.parametrize("ttl", ["10m", "2h", "", None])
def test_it_rejects_any_other_ttl(ttl):
    with pytest.raises(ValueError):
        apply_anthropic_cache_control(convo(), cache_ttl=ttl)


def test_it_uses_four_message_breakpoints_without_a_system_prompt():
    msgs = [user(str(i)) if i % 2 == 0 else assistant(str(i)) for i in range(8)]
    out = apply_anthropic_cache_control(msgs)
    marked = [i for i, m in enumerate(out) if isinstance(m["content"], list)]
    assert marked == [4, 5, 6, 7]


def test_it_never_exceeds_four_breakpoints_even_with_markers_already_present():
    once = apply_anthropic_cache_control(convo() * 3)
    twice = apply_anthropic_cache_control(once + [user("new")])
    assert count_breakpoints(twice) == MAX_BREAKPOINTS


def test_it_puts_openrouter_tool_markers_in_content_and_skips_empty_ones():
    msgs = [system("sys"), user("u"), assistant(None, [call("a", "t"), call("b", "t")]), result("a", "body"), result("b", ""), user("last")]
    out = apply_anthropic_cache_control(msgs, native_anthropic=False)
    assert out[3]["content"] == [{"type": "text", "text": "body", "cache_control": M5}]
    assert "cache_control" not in out[2] and "cache_control" not in out[4]
    assert out[4]["content"] == ""
    # The skipped carriers did not use up a breakpoint: "u" got one instead.
    assert out[1]["content"][0]["cache_control"] == M5
    assert count_breakpoints(out) == 4


def test_it_handles_odd_list_content_without_crashing():
    msgs = [system("s"), user([]), user(["bare string"]), user("ok")]
    out = apply_anthropic_cache_control(msgs)
    assert out[1]["content"] == [] and out[2]["content"] == ["bare string"]
    assert count_breakpoints(out) == 2


def test_it_selects_strategies_by_name_and_accepts_new_ones():
    assert {"none", "system_and_3"} <= set(available_cache_strategies())
    plain = apply_cache_strategy(convo(), strategy="none")
    assert count_breakpoints(plain.messages) == 0

    def last_only(messages, *, marker, native_anthropic, tools):
        from compression.core.caching import CachedRequest

        messages[-1]["cache_control"] = marker
        return CachedRequest(messages, tools, 1, "last_only")

    register_cache_strategy("last_only", last_only)
    res = apply_cache_strategy(convo(), strategy="last_only", tools=[{"name": "t", "cache_control": M5}])
    assert res.breakpoints == 1 and "cache_control" not in res.tools[0]
    with pytest.raises(ValueError):
        apply_cache_strategy(convo(), strategy="nope")


@pytest.mark.parametrize(
    ("model", "provider", "base_url", "api_mode", "enabled", "route"),
    [
        ("claude-sonnet-4-5", "anthropic", None, None, True, "native Anthropic"),
        ("claude-sonnet-4-5", "custom", "https://api.anthropic.com/v1", None, True, "native Anthropic"),
        ("anthropic/claude-sonnet-4.5", "openrouter", "https://openrouter.ai/api/v1", None, True, "OpenRouter"),
        ("sim-claude-200k", "simulator", "http://127.0.0.1:9999", None, True, "the simulator (Anthropic-compatible)"),
        ("claude-sonnet-4-5", "custom", "https://gw.example.com", "anthropic_messages", True, "Anthropic-compatible endpoint"),
        ("claude-sonnet-4-5", "custom", "https://gw.example.com/v1", None, False, ""),
        ("gpt-4o", "openrouter", "https://openrouter.ai/api/v1", None, False, ""),
        ("hermes-3", "nous", None, None, False, ""),
    ],
)
def test_it_reports_the_prompt_caching_status(model, provider, base_url, api_mode, enabled, route):
    status = prompt_caching_status(model, provider, base_url, api_mode)
    assert (status.enabled, status.route) == (enabled, route)
    assert bool(status.reason) is not enabled


def test_it_labels_the_status_for_the_dashboard():
    on = prompt_caching_status("claude-opus-4-8", "openrouter", None)
    assert on.label("1h") == ("Prompt caching: ENABLED (Claude via OpenRouter; strategy system_and_3: "
                              "1h on the system prompt and the last 3 messages)")
    # The strategy is named with both TTLs it writes, not only the configured one.
    rolling = on.label("5m", "rolling_1h")
    assert "strategy rolling_1h" in rolling and "1h on the system prompt" in rolling and "5m on the messages" in rolling
    assert on.label("5m", "none").startswith("Prompt caching: OFF (strategy none")
    assert on.label("5m", "a_plugin_strategy").endswith("strategy a_plugin_strategy: 5m TTL)")
    assert not on.native_layout
    off = prompt_caching_status("gpt-4o", "openrouter", None)
    assert off.label() == "Prompt caching: DISABLED (model gpt-4o is not a Claude model)"
    enabled, route, reason = prompt_caching_status("claude-haiku-4-5", "anthropic", None)
    assert enabled and route == "native Anthropic" and reason == ""
