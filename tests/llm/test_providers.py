"""The provider interface over real HTTP: Anthropic (SDK) and OpenAI-compatible (openai SDK)."""

from __future__ import annotations

import json
import socket

import pytest

from llm.anthropic_provider import AnthropicProvider
from llm.base import Final, TextDelta, ToolCall
from llm.errors import (
    AuthenticationError,
    ContextOverflowError,
    InvalidRequestError,
    ProviderUnavailableError,
    RateLimitError,
)
from llm.openai_provider import OpenAICompatibleProvider
from llm.providers import UnknownProviderError, get_provider
from llm.usage import Usage
from tests.simulator.conftest import MODEL

SYSTEM = "You are Hermes. " + " ".join(f"Guideline {i}: be precise and cite the files you touched." for i in range(100))
TOOLS = [  # the project's tools, in the OpenAI form the agent keeps them in
    {"type": "function", "function": {"name": "read_file", "description": "Read a workspace file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}}, "required": ["path"]}}},
    {"type": "function", "function": {"name": "write_file", "description": "Write a workspace file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "terminal", "description": "Run a command",
                                      "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
]
M5 = {"type": "ephemeral"}


def marked(messages):
    """system_and_3-style markers, placed as the caching module does (native layout)."""
    out = [dict(m) for m in messages]
    out[0]["content"] = [{"type": "text", "text": out[0]["content"], "cache_control": M5}]
    for m in out[1:][-3:]:
        if isinstance(m.get("content"), str) and m["content"]:
            m["content"] = [{"type": "text", "text": m["content"], "cache_control": M5}]
        else:
            m["cache_control"] = M5
    return out


@pytest.fixture
def provider(server):
    return get_provider("simulator", base_url=server.base_url, model=MODEL)


def test_it_streams_text_then_tool_calls_then_a_final_event(provider):
    events = list(provider.stream([{"role": "system", "content": SYSTEM}, {"role": "user", "content": "read notes.txt"}], tools=TOOLS))
    kinds = [type(e) for e in events]
    assert kinds == [TextDelta, ToolCall, Final]
    call, final = events[1], events[2]
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "notes.txt"})
    assert final.stop_reason == "tool_use" and final.model == MODEL and final.latency > 0
    assert final.message["tool_calls"] == [call.as_message_part()]
    assert final.message["content"] == events[0].text
    assert isinstance(final.usage, Usage) and final.usage.prompt_tokens > 1000
    assert final.request_id.startswith("req_")


def test_it_runs_a_two_turn_tool_conversation_with_cache_reads(provider):
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "run `ls -la` please"}]
    first = provider.complete(marked(history), tools=TOOLS)
    assert first.tool_calls[0]["function"]["name"] == "terminal"
    assert first.usage.cache_write > 0 and first.usage.cache_read == 0
    history += [first.message, {"role": "tool", "tool_call_id": first.tool_calls[0]["id"], "name": "terminal",
                                "content": "total 8\ndrwxr-xr-x 2 a a 4096 .\n-rw-r--r-- 1 a a 10 notes.txt"}]
    second = provider.complete(marked(history), tools=TOOLS)
    assert second.stop_reason == "end_turn"
    assert "`ls -la` printed 3 lines; first: 'total 8'" in second.text
    assert second.usage.cache_read >= first.usage.cache_write - 50
    assert second.usage.prompt_tokens > first.usage.prompt_tokens


def test_it_reports_a_rejected_request_with_the_api_text(provider):
    broken = [{"role": "user", "content": "go"},
              {"role": "assistant", "content": "", "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}]},
              {"role": "user", "content": "hello?"}]
    with pytest.raises(InvalidRequestError) as info:
        provider.complete(broken, tools=TOOLS)
    assert info.value.status_code == 400
    assert info.value.message.startswith("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: call_9.")


def test_it_completes_a_plain_prompt_string(provider):
    final = provider.complete("reply with 12 words")
    assert len(final.text.split()) == 12 and final.usage.output > 0


def test_it_summarises_a_compression_prompt_from_the_engine(provider):
    from compression.core.summary import build_summary_prompt

    turns = [
        {"role": "user", "content": "Migrate the billing service to Postgres. The budget is 4,500 EUR."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "billing/db.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: connection refused on port 5432"},
        {"role": "assistant", "content": "The database is down."},
        {"role": "user", "content": "Then write the migration plan to plan.md"},
    ]
    text = provider.complete(build_summary_prompt(turns, budget=2000)).text
    assert text.startswith("## Goal\nMigrate the billing service to Postgres.")
    assert "- read billing/db.py" in text
    assert "Error: connection refused on port 5432" in text
    assert "The budget is 4,500 EUR." in text and "plan.md" in text


def test_it_refuses_to_send_without_an_anthropic_key():
    provider = get_provider("anthropic", model=MODEL, env={}, base_url="http://127.0.0.1:9")
    with pytest.raises(AuthenticationError):
        provider.complete("hi")


def test_it_reports_an_unreachable_endpoint_as_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = get_provider("simulator", base_url=f"http://127.0.0.1:{port}", model=MODEL, max_retries=0)
    with pytest.raises(ProviderUnavailableError):
        provider.complete("hi")


def test_it_builds_every_named_provider():
    assert isinstance(get_provider("anthropic", api_key="k", env={}), AnthropicProvider)
    simulator = get_provider("simulator", env={"HERMES_SIMULATOR_URL": "http://127.0.0.1:9999"})
    assert simulator.name == "simulator" and str(simulator.client.base_url).startswith("http://127.0.0.1:9999")
    openrouter = get_provider("openrouter", api_key="k", env={})
    assert isinstance(openrouter, OpenAICompatibleProvider) and openrouter.base_url == "https://openrouter.ai/api/v1"
    assert get_provider("nous", api_key="k", env={}).name == "nous"
    assert get_provider("custom", base_url="http://127.0.0.1:1/v1").name == "custom"
    with pytest.raises(ValueError):
        get_provider("custom")
    with pytest.raises(UnknownProviderError):
        get_provider("bedrock")


# -- OpenAI-compatible route, against the simulator's /v1/chat/completions --------------------


@pytest.fixture
def openai_provider(server):
    return get_provider("custom", base_url=server.openai_base_url, api_key="sk-or-test", model=MODEL)


def envelope(messages):
    """OpenRouter layout: markers on content parts only."""
    out = [dict(m) for m in messages]
    for m in [out[0], *out[1:][-3:]]:
        if isinstance(m.get("content"), str) and m["content"]:
            m["content"] = [{"type": "text", "text": m["content"], "cache_control": M5}]
    return out


def test_it_streams_tool_calls_through_an_openai_compatible_route(openai_provider):
    events = list(openai_provider.stream([{"role": "user", "content": "write hello to out.txt"}], tools=TOOLS))
    call = next(e for e in events if isinstance(e, ToolCall))
    assert (call.name, json.loads(call.arguments)) == ("write_file", {"path": "out.txt", "content": "hello"})
    final = events[-1]
    assert isinstance(final, Final) and final.stop_reason == "tool_use"
    assert final.message["tool_calls"][0]["id"] == call.id


def test_it_normalises_openrouter_cache_fields(openai_provider):
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hello", "_tokens": 3}]
    first = openai_provider.complete(envelope(history))
    history += [first.message, {"role": "user", "content": "and again"}]
    second = openai_provider.complete(envelope(history))
    assert first.usage.cache_write > 1000 and first.usage.cache_read == 0
    assert second.usage.cache_read == first.usage.cache_write
    assert second.usage.input == second.usage.prompt_tokens - second.usage.cache_read - second.usage.cache_write
    assert second.stop_reason == "end_turn"


def test_it_maps_openai_route_errors_to_typed_errors(openai_provider):
    with pytest.raises(ContextOverflowError) as info:
        openai_provider.complete("hi", extra_headers={"x-sim-fault": "overflow=64000"})
    assert info.value.limit == 64_000
    with pytest.raises(RateLimitError):
        openai_provider.complete("hi", extra_headers={"x-sim-fault": "429"})
    with pytest.raises(ProviderUnavailableError):
        openai_provider.complete("hi", extra_headers={"x-sim-fault": "midstream"})
    bad_key = OpenAICompatibleProvider(base_url=openai_provider.base_url, api_key="", model=MODEL, max_retries=0)
    bad_key.client.api_key = ""
    with pytest.raises(AuthenticationError):
        bad_key.complete("hi")
