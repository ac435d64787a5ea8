"""The caching strategies' placements, converted by the product and sent through the official SDK,
billed by the simulator under the documented rules: why `rolling_1h` survives a long pause."""

from __future__ import annotations

import json

from compression.core.caching import apply_cache_strategy
from llm.convert import to_anthropic_request
from tests.simulator.conftest import MODEL

SYSTEM = {"role": "system", "content": "the " * 2000}


def send(client, messages, strategy):
    cached = apply_cache_strategy(messages, strategy)
    body = to_anthropic_request(cached.messages, model=MODEL, max_tokens=16)
    return client.messages.create(**body).usage


def turn_then_pause(client, server, strategy):
    """A tool turn (two calls, 2 s apart), 30 minutes of silence, then the next turn's first call."""
    call = {"id": "toolu_a", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": "x"})}}
    history = [SYSTEM, {"role": "user", "content": "read x"}]
    first = send(client, history, strategy)
    history += [{"role": "assistant", "content": "I'll use read_file.", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "toolu_a", "content": "body " * 3000}]
    server.sim.clock.advance(2)
    second = send(client, history, strategy)
    server.sim.clock.advance(1800)
    history += [{"role": "assistant", "content": "x holds 3000 words."}, {"role": "user", "content": "thanks"}]
    return first, second, send(client, history, strategy)


def test_rolling_1h_finds_the_conversation_up_to_the_last_reply_after_a_30_minute_pause(client, server):
    _, second, after = turn_then_pause(client, server, "rolling_1h")
    reply = second.cache_creation.ephemeral_1h_input_tokens
    assert 0 < reply < 40  # the short reply is the only 1h write; the tool result is a 5m write
    assert second.cache_creation.ephemeral_5m_input_tokens > 3000
    # After the pause: everything up to the reply is read (what the second call read, plus the
    # reply it wrote at 1h); only the tool result and what followed are written again.
    assert after.cache_read_input_tokens == second.cache_read_input_tokens + reply
    assert after.cache_creation.ephemeral_1h_input_tokens == 0


def test_system_and_3_rewrites_everything_after_the_same_pause(client, server):
    _, second, after = turn_then_pause(client, server, "system_and_3")
    assert second.cache_creation.ephemeral_1h_input_tokens == 0
    assert after.cache_read_input_tokens == 0 and after.input_tokens == 0
    assert after.cache_creation_input_tokens > second.cache_read_input_tokens + second.cache_creation_input_tokens


def test_warm_anchor_s_re_pin_does_not_survive_the_pause_under_the_documented_rules(client, server):
    _, second, after = turn_then_pause(client, server, "warm_anchor")
    # Its 1h anchor sits on the prefix the second call read: billed as a read, no 1h entry made.
    assert second.cache_creation.ephemeral_1h_input_tokens == 0
    assert after.cache_read_input_tokens < second.cache_read_input_tokens
