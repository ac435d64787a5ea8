"""Prompt caching as Anthropic's rules predict, observed through the real SDK over HTTP.

Expected numbers are computed by hand from the product tokenizer: a block's tokens are its text's
tokens, plus 4 per message (on its first block).
"""

from __future__ import annotations

import anthropic

from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
from tests.simulator.conftest import MODEL

M5 = {"type": "ephemeral"}
H1 = {"type": "ephemeral", "ttl": "1h"}
SYSTEM = "You are Hermes, a careful coding agent. " + " ".join(
    f"Rule {i}: keep the workspace tidy and explain each change briefly." for i in range(120)
)


def msg_tokens(text: str) -> int:
    return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS


def user(text: str, marker=None) -> dict:
    block = {"type": "text", "text": text}
    if marker:
        block["cache_control"] = marker
    return {"role": "user", "content": [block]}


def call(client: anthropic.Anthropic, messages, system=SYSTEM, system_marker=M5, model=MODEL):
    system_block = {"type": "text", "text": system}
    if system_marker:
        system_block["cache_control"] = system_marker
    response = client.messages.create(model=model, max_tokens=64, system=[system_block], messages=messages)
    return response, response.usage


def test_it_reads_the_cached_prefix_on_the_second_call(client):
    assert count_tokens(SYSTEM) > 1024
    first, u1 = call(client, [user("hello", M5)])
    assert u1.cache_read_input_tokens == 0
    assert u1.cache_creation_input_tokens == count_tokens(SYSTEM) + msg_tokens("hello")
    assert u1.cache_creation.ephemeral_5m_input_tokens == u1.cache_creation_input_tokens
    assert u1.input_tokens == 0

    reply = first.content[0].text
    _, u2 = call(client, [user("hello"), {"role": "assistant", "content": reply}, user("and now?", M5)])
    assert u2.cache_read_input_tokens == count_tokens(SYSTEM) + msg_tokens("hello")
    assert u2.cache_creation_input_tokens == msg_tokens(reply) + msg_tokens("and now?")
    assert u2.input_tokens == 0


def test_it_counts_uncached_blocks_after_the_last_breakpoint_as_input(client):
    _, usage = call(client, [user("hello", M5), {"role": "assistant", "content": "hi"}, user("tail")])
    assert usage.input_tokens == msg_tokens("hi") + msg_tokens("tail")
    total = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
    assert total == count_tokens(SYSTEM) + msg_tokens("hello") + msg_tokens("hi") + msg_tokens("tail")


def test_it_misses_below_the_minimum_cacheable_length(client):
    short = "You are brief."
    for _ in range(2):
        _, usage = call(client, [user("hello", M5)], system=short)
        assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
        assert usage.input_tokens == count_tokens(short) + msg_tokens("hello")


def test_it_misses_after_the_ttl_expires_on_the_injected_clock(client, control):
    call(client, [user("hello", M5)])
    control("/_sim/clock", {"advance": 299})
    _, hit = call(client, [user("hello", M5)])
    assert hit.cache_read_input_tokens > 0
    control("/_sim/clock", {"advance": 299})  # the hit refreshed the 5-minute TTL
    _, refreshed = call(client, [user("hello", M5)])
    assert refreshed.cache_read_input_tokens == hit.cache_read_input_tokens
    control("/_sim/clock", {"advance": 301})
    _, miss = call(client, [user("hello", M5)])
    assert miss.cache_read_input_tokens == 0
    assert miss.cache_creation_input_tokens == hit.cache_read_input_tokens


def test_it_keeps_a_1h_entry_past_five_minutes_and_splits_writes_by_ttl(client, control):
    _, first = call(client, [user("hello", M5)], system_marker=H1)
    assert first.cache_creation.ephemeral_1h_input_tokens == count_tokens(SYSTEM)
    assert first.cache_creation.ephemeral_5m_input_tokens == msg_tokens("hello")
    control("/_sim/clock", {"advance": 600})
    _, later = call(client, [user("hello", M5)], system_marker=H1)
    assert later.cache_read_input_tokens == count_tokens(SYSTEM)
    assert later.cache_creation.ephemeral_5m_input_tokens == msg_tokens("hello")


def test_it_misses_after_the_system_prompt_changes(client):
    call(client, [user("hello", M5)])
    _, usage = call(client, [user("hello", M5)], system=SYSTEM + " One more rule.")
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_input_tokens == count_tokens(SYSTEM + " One more rule.") + msg_tokens("hello")


def test_it_scopes_the_cache_by_model_and_api_key(client, server):
    call(client, [user("hello", M5)])
    _, other_model = call(client, [user("hello", M5)], model="sim-claude-1m")
    assert other_model.cache_read_input_tokens == 0
    other_key = anthropic.Anthropic(api_key="sk-test-bob", base_url=server.base_url)
    _, other = call(other_key, [user("hello", M5)])
    assert other.cache_read_input_tokens == 0


def test_it_looks_back_only_about_twenty_blocks_from_a_breakpoint(client):
    call(client, [user("hello", M5)])
    history = [user("hello")]
    for i in range(12):  # 24 new blocks: the old breakpoint is out of reach of the new one
        history += [{"role": "assistant", "content": f"answer {i}"}, user(f"question {i}")]
    history[-1] = user("question 11", M5)
    _, usage = call(client, history)
    # Only the system breakpoint's own prefix is found again.
    assert usage.cache_read_input_tokens == count_tokens(SYSTEM)


def test_it_makes_an_entry_visible_only_to_later_requests(client):
    _, usage = call(client, [user("hello", M5)])
    assert usage.cache_read_input_tokens == 0 and usage.cache_creation_input_tokens > 0


def test_it_caches_tool_definitions_before_the_system_prompt(client):
    tools = [{"name": "read_file", "description": "Read a file from the workspace. " * 300, "input_schema": {"type": "object", "properties": {}}, "cache_control": M5}]
    for expected_read in (0, True):
        response = client.messages.create(model=MODEL, max_tokens=16, tools=tools, system="short system",
                                          messages=[user("hello")])
        if expected_read:
            assert response.usage.cache_read_input_tokens > 1024
        else:
            assert response.usage.cache_creation_input_tokens > 1024


def test_it_reports_cache_figures_in_the_stream_too(client):
    call(client, [user("hello", M5)])
    system = [{"type": "text", "text": SYSTEM, "cache_control": M5}]
    with client.messages.stream(model=MODEL, max_tokens=32, system=system, messages=[user("hello", M5)]) as stream:
        final = stream.get_final_message()
    assert final.usage.cache_read_input_tokens == count_tokens(SYSTEM) + msg_tokens("hello")
    assert final.usage.output_tokens >= 1
