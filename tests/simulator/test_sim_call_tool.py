"""The "call tool <name> with <JSON object>" trigger, over HTTP with the official SDKs: the call
(Anthropic `tool_use`, OpenAI `tool_calls`, streamed and not), the report of its result, the
not-offered and bad-arguments replies, no second call, and the older triggers left as they were."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from compression.core.tokens import count_tokens
from tests.simulator.conftest import MODEL, SIM_KEY

TOOLS = [
    {"name": "lookup", "description": "Look a key up.", "input_schema": {"type": "object"}},
    {"name": "get.weather-v2", "description": "The weather.", "input_schema": {"type": "object"}},
    {"name": "read_file", "description": "Read a file.",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
]
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
    for t in TOOLS
]
NESTED = {"query": {"city": "Lisbon", "days": [1, 2, {"hourly": True, "unit": None}]}, "note": "line 1\nline 2 é"}
LONG_RESULT = "".join(f"{n:04d}:" for n in range(100))  # 500 characters, each position distinguishable
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


@pytest.fixture
def oai(server):
    return openai.OpenAI(api_key=SIM_KEY, base_url=server.openai_base_url, max_retries=0)


def ask(client: anthropic.Anthropic, messages, tools=TOOLS, stream=False, **kw):
    args = dict(model=MODEL, max_tokens=1024, messages=messages, **kw)
    if tools is not None:
        args["tools"] = tools
    if stream:
        with client.messages.stream(**args) as s:
            return s.get_final_message()
    return client.messages.create(**args)


def only_text(message) -> str:
    assert [b.type for b in message.content] == ["text"], message.content
    assert message.stop_reason == "end_turn"
    return message.content[0].text


def the_call(message):
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["tool_use"], message.content
    return message.content[0]


def after_result(message, trigger: str, content):
    """The conversation that sends back the result of `message`'s (first) call."""
    call = next(b for b in message.content if b.type == "tool_use")
    return [
        {"role": "user", "content": trigger},
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": content}]},
    ]


# -- the call (Anthropic) ----------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_it_calls_the_named_tool_with_the_arguments(client, stream):
    trigger = 'call tool lookup with {"key": "budget", "limit": 3}'
    message = ask(client, [{"role": "user", "content": trigger}], stream=stream)
    call = the_call(message)
    assert call.name == "lookup" and call.input == {"key": "budget", "limit": 3}
    assert call.id.startswith("toolu_sim")


def test_the_call_is_deterministic_and_billed_like_any_reply(client):
    messages = [{"role": "user", "content": 'call tool lookup with {"key": "budget"}'}]
    first, again = ask(client, messages), ask(client, messages)
    assert first.content[0].id == again.content[0].id
    call = the_call(first)
    # Output: the whole tool_use block, as the simulator bills every call; input: the prompt.
    block = {"type": "tool_use", "id": call.id, "name": "lookup", "input": {"key": "budget"}}
    assert first.usage.output_tokens == count_tokens(json.dumps(block, ensure_ascii=False, separators=(",", ":")))
    prompt = client.messages.count_tokens(model=MODEL, messages=messages, tools=TOOLS).input_tokens
    assert first.usage.input_tokens + first.usage.cache_read_input_tokens + first.usage.cache_creation_input_tokens == prompt


@pytest.mark.parametrize("stream", [False, True])
def test_without_with_the_arguments_are_an_empty_object(client, stream):
    call = the_call(ask(client, [{"role": "user", "content": "call tool get.weather-v2"}], stream=stream))
    assert call.name == "get.weather-v2" and call.input == {}


@pytest.mark.parametrize("stream", [False, True])
def test_nested_arguments_spanning_lines_arrive_intact(client, stream):
    trigger = "  call tool lookup with " + json.dumps(NESTED, indent=2, ensure_ascii=False) + "\n\n"
    assert "\n" in trigger.strip()
    call = the_call(ask(client, [{"role": "user", "content": trigger}], stream=stream))
    assert call.input == NESTED


def test_the_stream_carries_the_same_message_as_the_plain_response(client):
    messages = [{"role": "user", "content": "call tool lookup with " + json.dumps(NESTED)}]
    with client.messages.stream(model=MODEL, max_tokens=1024, messages=messages, tools=TOOLS) as s:
        kinds = [event.type for event in s]
        streamed = s.get_final_message()
    plain = ask(client, messages)
    assert "input_json" in kinds and "text" not in kinds
    assert streamed.content == plain.content and streamed.stop_reason == "tool_use"
    assert streamed.usage.output_tokens == plain.usage.output_tokens


# -- the report of the result (Anthropic) ------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_the_result_is_reported_with_its_first_200_characters(client, stream):
    trigger = 'call tool lookup with {"key": "budget"}'
    first = ask(client, [{"role": "user", "content": trigger}], stream=stream)
    reply = ask(client, after_result(first, trigger, LONG_RESULT), stream=stream)
    assert only_text(reply) == f'tool lookup returned: "{LONG_RESULT[:200]}"'
    assert LONG_RESULT[:200].endswith("0039:")


@pytest.mark.parametrize("stream", [False, True])
def test_a_list_result_quotes_its_text_blocks_joined_and_skips_images(client, stream):
    trigger = "call tool lookup"
    first = ask(client, [{"role": "user", "content": trigger}], stream=stream)
    content = [{"type": "text", "text": "a" * 150}, IMAGE, {"type": "text", "text": "b" * 150}]
    reply = ask(client, after_result(first, trigger, content), stream=stream)
    assert only_text(reply) == 'tool lookup returned: "' + "a" * 150 + "\n" + "b" * 49 + '"'


def test_a_result_without_text_is_quoted_empty(client):
    trigger = "call tool lookup"
    first = ask(client, [{"role": "user", "content": trigger}])
    assert only_text(ask(client, after_result(first, trigger, [IMAGE]))) == 'tool lookup returned: ""'
    assert only_text(ask(client, after_result(first, trigger, ""))) == 'tool lookup returned: ""'


def test_a_short_result_is_quoted_whole(client):
    trigger = "call tool get.weather-v2 with {}"
    first = ask(client, [{"role": "user", "content": trigger}])
    reply = ask(client, after_result(first, trigger, 'sunny, "22 C"\nwind 3'))
    assert only_text(reply) == 'tool get.weather-v2 returned: "sunny, "22 C"\nwind 3"'


def test_after_the_result_it_does_not_call_again(client):
    """An agent loop: call tools while the model asks, send results back; one call, then the report."""
    trigger = 'call tool lookup with {"key": "x"}'
    messages: list[dict] = [{"role": "user", "content": trigger}]
    calls = 0
    for _ in range(5):
        message = ask(client, messages)
        if message.stop_reason != "tool_use":
            break
        calls += 1
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in message.content]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": "value of x"}
            for b in message.content if b.type == "tool_use"]})
    assert calls == 1
    assert only_text(message) == 'tool lookup returned: "value of x"'


# -- nothing called ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_not_offered_is_named_in_the_reply(client, stream):
    text = only_text(ask(client, [{"role": "user", "content": 'call tool missing with {"a": 1}'}], stream=stream))
    assert text == "no tool named missing is offered"
    assert only_text(ask(client, [{"role": "user", "content": "call tool lookup"}], tools=None)) == (
        "no tool named lookup is offered")
    # Names are compared exactly, and the offered check comes before the arguments'.
    assert only_text(ask(client, [{"role": "user", "content": "call tool Lookup"}])) == "no tool named Lookup is offered"
    assert only_text(ask(client, [{"role": "user", "content": "call tool nope with [1"}])) == "no tool named nope is offered"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ('{"a": }', "Expecting value at line 1 column 7"),
        ("{'a': 1}", "Expecting property name enclosed in double quotes at line 1 column 2"),
        ('{"a": 1} trailing', "Extra data at line 1 column 10"),
        ("[1, 2]", "it is a JSON array"),
        ('"text"', "it is a JSON string"),
        ("42", "it is a JSON number"),
        ("true", "it is a JSON boolean"),
        ("null", "it is JSON null"),
        ('{"a": NaN}', "NaN is not JSON"),
    ],
)
def test_arguments_that_are_not_a_json_object_are_refused(client, arguments, reason):
    text = only_text(ask(client, [{"role": "user", "content": f"call tool lookup with {arguments}"}]))
    assert text == f"the arguments for lookup are not a JSON object: {reason}"


@pytest.mark.parametrize("stream", [False, True])
def test_nothing_after_with_is_refused(client, stream):
    text = only_text(ask(client, [{"role": "user", "content": "call tool lookup with   "}], stream=stream))
    assert text == "the arguments for lookup are not a JSON object: nothing follows `with`"


# -- the OpenAI wire ---------------------------------------------------------------------------------


def openai_stream(oai, messages, tools=OPENAI_TOOLS):
    """The streamed chunks put together: (content, tool calls, finish_reason, usage)."""
    content, calls, finish, usage = "", {}, None, None
    stream = oai.chat.completions.create(model=MODEL, messages=messages, tools=tools, stream=True,
                                         stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] += tc.id or ""
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], finish, usage


def test_openai_wire_calls_the_tool_and_reports_the_result(oai):
    trigger = "call tool lookup with " + json.dumps(NESTED)
    messages = [{"role": "user", "content": trigger}]
    done = oai.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS)
    choice = done.choices[0]
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    [call] = choice.message.tool_calls
    assert call.function.name == "lookup" and isinstance(call.function.arguments, str)
    assert json.loads(call.function.arguments) == NESTED
    assert done.usage.completion_tokens > 0 and done.usage.prompt_tokens > 0

    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump(exclude_none=True)]},
        {"role": "tool", "tool_call_id": call.id, "content": LONG_RESULT},
    ]
    report = oai.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS).choices[0]
    assert report.finish_reason == "stop" and not report.message.tool_calls
    assert report.message.content == f'tool lookup returned: "{LONG_RESULT[:200]}"'


def test_openai_wire_streams_the_call_and_the_report(oai):
    trigger = "call tool get.weather-v2"
    messages = [{"role": "user", "content": trigger}]
    content, calls, finish, usage = openai_stream(oai, messages)
    plain = oai.chat.completions.create(model=MODEL, messages=messages, tools=OPENAI_TOOLS)
    assert finish == "tool_calls" and content == ""
    [call] = calls
    assert call["name"] == "get.weather-v2" and json.loads(call["arguments"]) == {}
    assert call["id"] == plain.choices[0].message.tool_calls[0].id
    assert usage.completion_tokens == plain.usage.completion_tokens

    parts = [{"type": "text", "text": "c" * 120}, {"type": "text", "text": "d" * 120}]
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": parts},
    ]
    content, calls, finish, _ = openai_stream(oai, messages)
    assert finish == "stop" and calls == []
    assert content == 'tool get.weather-v2 returned: "' + "c" * 120 + "\n" + "d" * 79 + '"'


def test_openai_wire_not_offered_and_bad_arguments(oai):
    def reply(text, tools=OPENAI_TOOLS):
        choice = oai.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": text}],
                                             tools=tools).choices[0]
        assert choice.finish_reason == "stop" and not choice.message.tool_calls
        return choice.message.content

    assert reply("call tool write_file with {}") == "no tool named write_file is offered"
    assert reply("call tool lookup with {oops}") == (
        "the arguments for lookup are not a JSON object: "
        "Expecting property name enclosed in double quotes at line 1 column 2")
    content, calls, finish, _ = openai_stream(oai, [{"role": "user", "content": "call tool lookup with [1]"}])
    assert (content, calls, finish) == ("the arguments for lookup are not a JSON object: it is a JSON array", [], "stop")


# -- the older triggers are unchanged ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["hello there", "please call tool lookup", "Call tool lookup", "call tool lookup now"])
def test_messages_that_are_not_the_trigger_get_the_plain_reply(client, text):
    assert only_text(ask(client, [{"role": "user", "content": text}])).startswith(f'You said: "{text}".')


def test_the_workspace_tool_phrases_and_their_report_are_unchanged(client):
    first = ask(client, [{"role": "user", "content": "read notes.txt"}])
    assert first.stop_reason == "tool_use"
    assert first.content[0].text == "I'll use read_file notes.txt."
    call = first.content[1]
    assert (call.name, call.input) == ("read_file", {"path": "notes.txt"})
    reply = ask(client, after_result(first, "read notes.txt", "alpha\nbeta"))
    assert only_text(reply) == "Here is what I found:\n- notes.txt: 10 chars, 2 lines; first line: 'alpha'"


def test_a_call_tool_result_of_another_tool_gets_the_usual_report(client):
    """The report names the call only when the trigger asked for that very tool."""
    trigger = "call tool read_file with {\"path\": \"notes.txt\"}"
    first = ask(client, [{"role": "user", "content": trigger}])
    call = the_call(first)
    assert (call.name, call.input) == ("read_file", {"path": "notes.txt"})
    messages = after_result(first, trigger, "alpha")
    messages[0]["content"] = "read notes.txt"  # the same call, asked for in the older words
    assert only_text(ask(client, messages)).startswith("Here is what I found:")
