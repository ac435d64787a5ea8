"""Internal OpenAI-style messages <-> Anthropic Messages bodies."""

from __future__ import annotations

import copy
import json

from llm.convert import convert_tool_schema, from_anthropic_response, to_anthropic_request
from simulator.validation import validate_messages_request

M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}


def tool_group():
    return [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "list_files", "arguments": ""}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "alpha"},
        {"role": "tool", "tool_call_id": "call_2", "name": "list_files", "content": "a.txt\nb.txt"},
    ]


def test_it_moves_system_messages_to_system_blocks():
    body = to_anthropic_request(
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], model="m", max_tokens=10
    )
    assert body["system"] == [{"type": "text", "text": "be brief"}]
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["model"] == "m" and body["max_tokens"] == 10 and "stream" not in body


def test_it_turns_tool_calls_into_tool_use_blocks_with_parsed_input():
    body = to_anthropic_request([{"role": "user", "content": "go"}, *tool_group()], model="m", max_tokens=10)
    assistant = body["messages"][1]
    assert assistant == {"role": "assistant", "content": [
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "call_2", "name": "list_files", "input": {}},
    ]}


def test_it_joins_consecutive_tool_messages_into_one_user_message_of_results():
    body = to_anthropic_request([{"role": "user", "content": "go"}, *tool_group()], model="m", max_tokens=10)
    assert body["messages"][2] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "alpha"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "a.txt\nb.txt"},
    ]}
    validate_messages_request(body)


def test_it_keeps_invalid_tool_arguments_visible_as_an_object():
    group = tool_group()
    group[0]["tool_calls"][0]["function"]["arguments"] = '{"path": "a.t'
    body = to_anthropic_request([{"role": "user", "content": "go"}, *group], model="m", max_tokens=10)
    assert body["messages"][1]["content"][0]["input"] == {"raw_arguments": '{"path": "a.t'}


def test_it_moves_message_level_markers_onto_the_last_block():
    group = tool_group()
    group[0]["cache_control"] = M5  # empty-content assistant: the caching module marks the message
    group[2]["cache_control"] = H1  # tool message: marker goes onto its tool_result block
    body = to_anthropic_request([{"role": "user", "content": "go"}, *group], model="m", max_tokens=10)
    assert body["messages"][1]["content"][-1]["cache_control"] == M5
    assert "cache_control" not in body["messages"][1]["content"][0]
    results = body["messages"][2]["content"]
    assert "cache_control" not in results[0] and results[1]["cache_control"] == H1
    assert all("cache_control" not in m for m in body["messages"])


def test_it_preserves_markers_on_content_parts_and_system_lists():
    messages = [
        {"role": "system", "content": [{"type": "text", "text": "sys", "cache_control": H1}]},
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": M5}]},
    ]
    body = to_anthropic_request(messages, model="m", max_tokens=10)
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": H1}]
    assert body["messages"][0]["content"] == [{"type": "text", "text": "hello", "cache_control": M5}]
    validate_messages_request(body)


def test_it_strips_underscore_metadata_everywhere():
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "x", "_private": 1}], "_tokens": 5, "_compressed_summary": True},
        {"role": "assistant", "content": "y", "_id": 3, "reasoning": "hidden"},
    ]
    body = to_anthropic_request(messages, model="m", max_tokens=10, tools=[{"name": "t", "parameters": {}, "_x": 1}])
    text = json.dumps(body)
    for key in ('"_tokens"', '"_private"', '"_compressed_summary"', '"_x"', '"_id"'):
        assert key not in text
    assert "hidden" not in text
    validate_messages_request(body)


def test_it_never_mutates_its_input():
    messages = [{"role": "user", "content": "go"}, *tool_group()]
    messages[1]["cache_control"] = M5
    before = copy.deepcopy(messages)
    body = to_anthropic_request(messages, model="m", max_tokens=10)
    body["messages"][1]["content"][0]["input"]["path"] = "changed"
    assert messages == before


def test_it_drops_empty_text_and_messages_left_empty():
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ""}, {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "next"}]}]
    body = to_anthropic_request(messages, model="m", max_tokens=10)
    assert [m["role"] for m in body["messages"]] == ["user", "user"]
    assert body["messages"][1]["content"] == [{"type": "text", "text": "next"}]


def test_it_converts_image_parts():
    messages = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "image_url", "image_url": {"url": "https://example.invalid/x.png"}},
    ]}]
    content = to_anthropic_request(messages, model="m", max_tokens=10)["messages"][0]["content"]
    assert content[0] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    assert content[1] == {"type": "image", "source": {"type": "url", "url": "https://example.invalid/x.png"}}


def test_it_converts_tool_schemas_in_every_form_and_keeps_their_markers():
    params = {"type": "object", "properties": {"path": {"type": "string"}}}
    openai_form = {"type": "function", "function": {"name": "read_file", "description": "Read", "parameters": params}, "cache_control": M5}
    simple_form = {"name": "read_file", "description": "Read", "parameters": params}
    native_form = {"name": "read_file", "description": "Read", "input_schema": params}
    expected = {"name": "read_file", "description": "Read", "input_schema": params}
    assert convert_tool_schema(openai_form) == dict(expected, cache_control=M5)
    assert convert_tool_schema(simple_form) == expected
    assert convert_tool_schema(native_form) == expected


def test_it_passes_extra_fields_and_the_stream_flag():
    body = to_anthropic_request(
        [{"role": "user", "content": "hi"}], model="m", max_tokens=5, stream=True,
        tool_choice={"type": "auto"}, metadata={"user_id": "alice"}, system="prefix",
    )
    assert body["stream"] is True and body["tool_choice"] == {"type": "auto"}
    assert body["metadata"] == {"user_id": "alice"}
    assert body["system"] == [{"type": "text", "text": "prefix"}]


def test_it_reads_a_response_back_as_an_internal_assistant_message():
    response = {"content": [
        {"type": "thinking", "thinking": "hmm", "signature": "s"},
        {"type": "text", "text": "Reading. "},
        {"type": "text", "text": "Now."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.txt"}},
    ]}
    assert from_anthropic_response(response) == {
        "role": "assistant",
        "content": "Reading. Now.",
        "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.txt"}'}}],
    }


def test_it_round_trips_a_tool_turn():
    response = {"content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "toolu_9", "name": "terminal", "input": {"command": "ls"}}]}
    internal = from_anthropic_response(response)
    body = to_anthropic_request(
        [{"role": "user", "content": "run ls"}, internal, {"role": "tool", "tool_call_id": "toolu_9", "content": "a\nb"}],
        model="m", max_tokens=10,
    )
    assert body["messages"][1]["content"] == response["content"]
    validate_messages_request(body)
