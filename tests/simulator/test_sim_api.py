"""The simulator speaks the Messages API the way the real SDK expects (real HTTP, no mocks)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anthropic
import pytest

from tests.simulator.conftest import MODEL

TOOLS = [
    {"name": "read_file", "description": "Read a file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
    {"name": "list_files", "description": "List files", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
]


def raw_post(server, path, payload, headers):
    request = urllib.request.Request(server.base_url + path, data=json.dumps(payload).encode(), method="POST",
                                     headers={"content-type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, json.loads(error.read())


def test_it_streams_a_tool_call_with_the_event_sequence_the_sdk_expects(client):
    with client.messages.stream(model=MODEL, max_tokens=200, tools=TOOLS,
                                messages=[{"role": "user", "content": "please read notes.txt"}]) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
        request_id = stream.request_id
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "text", "content_block_stop",
                     "content_block_start", "content_block_delta", "input_json", "content_block_delta", "input_json",
                     "content_block_stop", "message_delta", "message_stop"]
    assert final.stop_reason == "tool_use"
    tool_use = final.content[-1]
    assert (tool_use.type, tool_use.name, tool_use.input) == ("tool_use", "read_file", {"path": "notes.txt"})
    assert request_id.startswith("req_")


def test_it_round_trips_a_two_turn_tool_conversation(client):
    messages = [{"role": "user", "content": "list files in src and read README.md"}]
    first = client.messages.create(model=MODEL, max_tokens=200, tools=TOOLS, messages=messages)
    calls = [b for b in first.content if b.type == "tool_use"]
    assert [(c.name, c.input) for c in calls] == [("list_files", {"path": "src"}), ("read_file", {"path": "README.md"})]
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": calls[0].id, "content": "app.py\nutil.py"},
            {"type": "tool_result", "tool_use_id": calls[1].id, "content": "# Demo\nSecond line"},
        ]},
    ]
    second = client.messages.create(model=MODEL, max_tokens=200, tools=TOOLS, messages=messages)
    text = second.content[0].text
    assert second.stop_reason == "end_turn"
    assert "src holds 2 entries (app.py, util.py)" in text
    assert "README.md: 18 chars, 2 lines; first line: '# Demo'" in text


def test_it_answers_the_same_request_identically(client):
    messages = [{"role": "user", "content": "tell me about caching please"}]
    a = client.messages.create(model=MODEL, max_tokens=300, messages=messages)
    b = client.messages.create(model=MODEL, max_tokens=300, messages=messages)
    assert a.content[0].text == b.content[0].text


def test_it_rejects_a_tool_use_without_its_result_with_the_api_text(client):
    messages = [
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01Hq", "name": "read_file", "input": {"path": "a.txt"}}]},
        {"role": "user", "content": "never mind"},
    ]
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=50, tools=TOOLS, messages=messages)
    assert info.value.status_code == 400 and info.value.type == "invalid_request_error"
    assert info.value.api_message == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_01Hq. "
        "Each `tool_use` block must have a corresponding `tool_result` block in the next message."
    )
    assert info.value.request_id.startswith("req_")


def test_it_rejects_a_prompt_over_the_model_window(client):
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model="sim-claude-32k", max_tokens=50, messages=[{"role": "user", "content": "lorem ipsum " * 20_000}])
    assert info.value.api_message.startswith("prompt is too long: ")
    assert info.value.api_message.endswith(" tokens > 32000 maximum")


def test_it_rejects_max_tokens_over_the_model_cap(client):
    with pytest.raises(anthropic.BadRequestError) as info:
        with client.messages.stream(model="sim-claude-64k", max_tokens=16_001, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert info.value.api_message == (
        "max_tokens: 16001 > 16000, which is the maximum allowed number of output tokens for sim-claude-64k"
    )


def test_it_rejects_sampling_parameters_on_the_sdk_api_version(client):
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}], extra_body={"temperature": 0.5})
    assert info.value.api_message == "temperature: Extra inputs are not permitted"


def test_it_accepts_x_api_key_and_the_2023_api_version(server):
    status, headers, body = raw_post(
        server, "/v1/messages",
        {"model": MODEL, "max_tokens": 20, "temperature": 0.2, "messages": [{"role": "user", "content": "hi"}]},
        {"x-api-key": "sk-legacy", "anthropic-version": "2023-06-01"},
    )
    assert status == 200 and body["type"] == "message" and body["role"] == "assistant"
    assert headers["request-id"].startswith("req_") and headers["content-type"] == "application/json"


def test_it_requires_a_key_and_an_api_version(server):
    payload = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    status, _, body = raw_post(server, "/v1/messages", payload, {"anthropic-version": "2023-06-01"})
    assert status == 401 and body["error"]["type"] == "authentication_error"
    status, headers, body = raw_post(server, "/v1/messages", payload, {"x-api-key": "k"})
    assert status == 400 and body["error"]["message"] == "anthropic-version: header is required"
    assert body["type"] == "error" and body["request_id"] == headers["request-id"]


def test_it_rejects_keys_it_was_not_given(server):
    server.sim.api_keys = frozenset({"sk-only-this"})
    try:
        bad = anthropic.Anthropic(api_key="sk-wrong", base_url=server.base_url)
        with pytest.raises(anthropic.AuthenticationError):
            bad.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        good = anthropic.Anthropic(api_key="sk-only-this", base_url=server.base_url)
        assert good.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}]).content
    finally:
        server.sim.api_keys = None


def test_it_answers_404_for_an_unknown_model(client):
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="claude-unknown-9", max_tokens=5, messages=[{"role": "user", "content": "hi"}])


def test_it_counts_tokens_like_its_usage(client):
    messages = [{"role": "user", "content": "count these words for me"}]
    counted = client.messages.count_tokens(model=MODEL, messages=messages, system="be brief").input_tokens
    usage = client.messages.create(model=MODEL, max_tokens=10, messages=messages, system="be brief").usage
    assert counted == usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def test_it_lists_its_models_with_windows(client):
    models = {m.id: m for m in client.models.list().data}
    assert models["sim-claude-64k"].max_input_tokens == 64_000
    assert client.models.retrieve("sim-claude-200k").max_tokens == 64_000


def test_it_stops_at_max_tokens(client):
    response = client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "reply with 300 words"}])
    assert response.stop_reason == "max_tokens" and response.usage.output_tokens <= 5


def test_it_writes_the_requested_number_of_words(client):
    response = client.messages.create(model=MODEL, max_tokens=2000, messages=[{"role": "user", "content": "reply with 120 words"}])
    assert len(response.content[0].text.split()) == 120


def test_it_honours_stop_sequences(client):
    response = client.messages.create(model=MODEL, max_tokens=100, stop_sequences=["said"],
                                      messages=[{"role": "user", "content": "hello"}])
    assert (response.stop_reason, response.stop_sequence, response.content[0].text) == ("stop_sequence", "said", "You ")


def test_it_records_stats_per_request(client, control):
    client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model=MODEL, max_tokens=10, messages=[])
    stats = control("/_sim/stats")
    assert (stats["requests"], stats["errors"]) == (2, 1)
    ok, failed = stats["log"]
    assert ok["status"] == 200 and ok["prompt_tokens"] == stats["max_prompt_tokens"] > 0
    assert {"input", "cache_read", "cache_write", "output", "kind"} <= set(ok)
    assert failed["status"] == 400 and failed["error"] == "messages: at least one message is required"
    control("/_sim/reset", {})
    assert control("/_sim/stats")["requests"] == 0


def test_it_moves_its_clock_only_forward_over_http(control):
    start = control("/_sim/clock")["now"]
    assert control("/_sim/clock", {"advance": 360})["now"] == start + 360
    assert control("/_sim/clock", {"set": start + 4000})["now"] == start + 4000
    with pytest.raises(urllib.error.HTTPError) as info:
        control("/_sim/clock", {"set": start})
    assert info.value.code == 400


def test_it_keeps_a_pooled_connection_usable_after_a_midstream_error(client):
    with pytest.raises(anthropic.APIStatusError) as info:
        with client.messages.stream(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hello"}],
                                    extra_headers={"x-sim-fault": "midstream"}) as stream:
            stream.get_final_message()
    assert info.value.status_code == 200 and info.value.type == "overloaded_error"
    again = client.messages.create(model=MODEL, max_tokens=100, messages=[{"role": "user", "content": "hello"}])
    assert again.stop_reason == "end_turn"
