"""The simulator bills a tool call's whole envelope (its id and type, not only its name and input),
and a tool result's call id, as the product's estimator counts them: the two agree, so the gauge
and the simulated usage do."""
from __future__ import annotations

from compression.core.tokens import estimate_messages_tokens_rough
from llm.convert import convert_messages
from tests.simulator.conftest import MODEL


def conversation(ids: list[str]) -> list[dict]:
    calls = [{"id": i, "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.py"}'}}
             for i in ids]
    return [{"role": "user", "content": "read four files"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": i, "name": "read_file", "content": "ok"} for i in ids)]


def billed(client, messages) -> int:
    _, body = convert_messages(messages)
    return client.messages.count_tokens(model=MODEL, messages=body).input_tokens


def test_the_call_ids_are_billed(client):
    short = billed(client, conversation(["a", "b", "c", "d"]))
    long_ids = [f"toolu_01{'X' * 22}{n}" for n in range(4)]
    long = billed(client, conversation(long_ids))
    # Each id appears twice (the call and its result): longer ids cost more tokens.
    assert long - short >= 4 * 2 * 4


def test_the_simulator_and_the_estimator_agree_on_parallel_calls(client):
    messages = conversation([f"toolu_01{'Y' * 22}{n}" for n in range(4)])
    sim = billed(client, messages)
    ours = estimate_messages_tokens_rough(messages)
    assert 0.7 <= sim / ours <= 1.4, (sim, ours)
