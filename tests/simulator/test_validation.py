"""The strict validator: one test per rule, each checking the API's exact text."""

from __future__ import annotations

import pytest

from simulator.validation import InvalidRequest, validate_messages_request


def body(messages, **extra):
    return {"model": "sim-claude-200k", "max_tokens": 100, "messages": messages, **extra}


def assistant_calls(*ids):
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "read_file", "input": {"path": "a.txt"}} for i in ids],
    }


def results(*ids):
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]}


def rejects(request, **kw) -> str:
    with pytest.raises(InvalidRequest) as info:
        validate_messages_request(request, **kw)
    return info.value.message


def test_it_accepts_a_complete_tool_conversation():
    validate_messages_request(
        body([{"role": "user", "content": "read a.txt"}, assistant_calls("t1", "t2"), results("t1", "t2")])
    )


def test_it_rejects_a_tool_use_without_its_result_with_the_api_text():
    text = rejects(body([{"role": "user", "content": "hi"}, assistant_calls("toolu_A", "toolu_B"), results("toolu_A")]))
    assert text == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_B. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )


def test_it_lists_every_unanswered_id_and_names_the_assistant_message():
    text = rejects(
        body([{"role": "user", "content": "hi"}, assistant_calls("toolu_A", "toolu_B"), {"role": "user", "content": "go on"}])
    )
    assert text.startswith("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_A, toolu_B.")


def test_it_rejects_a_tool_call_left_as_the_last_message():
    text = rejects(body([{"role": "user", "content": "hi"}, assistant_calls("toolu_A")]))
    assert "toolu_A" in text and text.startswith("messages.1: `tool_use` ids were found")


def test_it_rejects_a_result_whose_call_is_not_in_the_previous_message():
    request = body(
        [{"role": "user", "content": "hi"}, assistant_calls("t1"), results("t1"), {"role": "assistant", "content": "ok"},
         {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "tool_result", "tool_use_id": "t1", "content": "again"}]}]
    )
    assert rejects(request) == (
        "messages.4.content.1: unexpected `tool_use_id` found in `tool_result` blocks: t1. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
    )


def test_it_rejects_duplicate_tool_use_ids():
    request = body([{"role": "user", "content": "hi"}, assistant_calls("t1", "t1"), results("t1")])
    assert rejects(request) == "messages.1.content.1: `tool_use` ids must be unique"


def test_it_rejects_more_than_four_breakpoints():
    marker = {"type": "ephemeral"}
    request = body(
        [{"role": "user", "content": [{"type": "text", "text": f"part {i}", "cache_control": marker} for i in range(4)]}],
        system=[{"type": "text", "text": "sys", "cache_control": marker}],
    )
    assert rejects(request) == "A maximum of 4 blocks with cache_control may be provided. Found 5."


def test_it_counts_breakpoints_inside_tool_results_and_on_tools():
    marker = {"type": "ephemeral"}
    request = body(
        [{"role": "user", "content": "hi"}, assistant_calls("t1"),
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                       "content": [{"type": "text", "text": "x", "cache_control": marker}],
                                       "cache_control": marker}]}],
        tools=[{"name": "a", "input_schema": {"type": "object"}, "cache_control": marker},
               {"name": "b", "input_schema": {"type": "object"}, "cache_control": marker}],
        system=[{"type": "text", "text": "s", "cache_control": marker}],
    )
    assert rejects(request).endswith("Found 5.")


def test_it_accepts_four_breakpoints():
    marker = {"type": "ephemeral"}
    validate_messages_request(
        body([{"role": "user", "content": [{"type": "text", "text": f"p{i}", "cache_control": marker} for i in range(4)]}])
    )


def test_it_rejects_a_1h_breakpoint_after_a_5m_one_with_its_path():
    request = body(
        [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}],
        system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    )
    assert rejects(request) == (
        "messages.0.content.1.cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block. Note that blocks are processed in the following order: `tools`, `system`, `messages`."
    )


def test_it_names_the_system_block_when_the_order_breaks_there():
    request = body(
        [{"role": "user", "content": "hi"}],
        tools=[{"name": "a", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral", "ttl": "5m"}}],
        system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
    )
    assert rejects(request).startswith("system.0.cache_control.ttl: a ttl='1h' cache_control block must not come after")


def test_it_accepts_1h_before_5m():
    validate_messages_request(
        body(
            [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}],
            system=[{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        )
    )


def test_it_rejects_an_unknown_ttl():
    request = body([{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral", "ttl": "10m"}}]}])
    assert rejects(request) == "messages.0.content.0.cache_control.ttl: Input should be '5m' or '1h'"


def test_it_rejects_a_prompt_longer_than_the_window():
    request = body([{"role": "user", "content": "word " * 400}])
    assert rejects(request, context_window=100, count_tokens=lambda t: len(t.split())) == (
        "prompt is too long: 400 tokens > 100 maximum"
    )


def test_it_counts_tools_system_and_message_overhead_in_the_prompt():
    request = body(
        [{"role": "user", "content": "one two"}, {"role": "assistant", "content": "three"}],
        system="four five",
        tools=[{"name": "six", "input_schema": {}}],
    )
    count = lambda t: len(t.split())  # noqa: E731
    # tool "six{}" = 1, system 2, messages 2 + 1, overhead 2 x 10
    assert rejects(request, context_window=25, count_tokens=count, message_overhead=10) == (
        "prompt is too long: 26 tokens > 25 maximum"
    )
    validate_messages_request(request, context_window=26, count_tokens=count, message_overhead=10)


def test_it_rejects_max_tokens_above_the_model_cap():
    request = body([{"role": "user", "content": "hi"}], max_tokens=128001)
    request["model"] = "claude-opus-4-5-20251101"
    assert rejects(request, max_output=64000) == (
        "max_tokens: 128001 > 64000, which is the maximum allowed number of output tokens for claude-opus-4-5-20251101"
    )


def test_it_rejects_sampling_parameters_on_the_2026_api_version_only():
    request = body([{"role": "user", "content": "hi"}], temperature=1.0)
    assert rejects(request, api_version="2026-10-21") == "temperature: Extra inputs are not permitted"
    validate_messages_request(request, api_version="2023-06-01")


def test_it_rejects_an_empty_message_list():
    assert rejects(body([])) == "messages: at least one message is required"


def test_it_rejects_empty_content_except_for_a_final_assistant_message():
    text = rejects(body([{"role": "user", "content": "hi"}, {"role": "assistant", "content": []}, {"role": "user", "content": "x"}]))
    assert text == "messages.1: all messages must have non-empty content except for the optional final assistant message"
    validate_messages_request(body([{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}]))


def test_it_rejects_empty_and_whitespace_text_blocks():
    assert rejects(body([{"role": "user", "content": [{"type": "text", "text": ""}]}])) == (
        "messages: text content blocks must be non-empty"
    )
    assert rejects(body([{"role": "user", "content": [{"type": "text", "text": "  \n"}]}])) == (
        "messages: text content blocks must contain non-whitespace text"
    )


def test_it_rejects_keys_the_api_does_not_know():
    assert rejects(body([{"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}}])) == (
        "messages.0.cache_control: Extra inputs are not permitted"
    )
    assert rejects(body([{"role": "user", "content": "hi", "_tokens": 3}])) == (
        "messages.0._tokens: Extra inputs are not permitted"
    )
    assert rejects(body([{"role": "user", "content": [{"type": "text", "text": "a", "name": "x"}]}])) == (
        "messages.0.content.0.name: Extra inputs are not permitted"
    )


def test_it_rejects_roles_the_api_does_not_take_in_messages():
    assert rejects(body([{"role": "tool", "content": "x"}])) == "messages.0.role: Input should be 'user' or 'assistant'"
    assert rejects(body([{"role": "system", "content": "x"}])) == "role 'system' is not supported on this model"


def test_it_requires_max_tokens_except_for_count_tokens():
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert rejects(request) == "max_tokens: Field required"
    validate_messages_request(request, require_max_tokens=False)
    assert rejects(dict(request, max_tokens=5), require_max_tokens=False) == "max_tokens: Extra inputs are not permitted"


def test_it_requires_tool_input_to_be_an_object():
    request = body([{"role": "user", "content": "hi"}, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "n", "input": "[]"}]}, results("t")])
    assert rejects(request) == "messages.1.content.0.input: Input should be a valid dictionary"


def test_it_applies_the_legacy_role_rules_only_when_strict():
    request = body([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    validate_messages_request(request)
    assert rejects(request, strict_roles=True) == (
        'messages: roles must alternate between "user" and "assistant", but found multiple "user" roles in a row'
    )
    assert rejects(body([{"role": "assistant", "content": "a"}]), strict_roles=True) == (
        'messages: first message must use the "user" role'
    )
