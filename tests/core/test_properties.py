"""Property tests: whatever the conversation, ``compress`` keeps every promise of SPEC §6.

Outputs are converted with the llm package's ``to_anthropic_request`` and checked with its strict
``validate_messages_request`` (the test imports llm; ``compression.core`` never does).
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compression.core.compressor import ContextCompressor
from compression.core.markers import SUMMARY_KEY
from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS, compute_message_tokens, content_text
from compression.core.tool_pairs import sanitize_tool_pairs, tool_pair_problems
from llm.convert import to_anthropic_request
from simulator.validation import validate_messages_request

WORDS = ["alpha", "beta", "gamma", "delta", "path/to/file.py", "error:", "42", "ünï", "{json}", "TODO", "🚀"]
TOOLS = ["read_file", "write_file", "list_files", "search_files", "terminal", "browser"]
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo" * 300}}
URL_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "R0lGOD" * 300}}

# Moderate by default to keep the suite fast; raise it for a soak run (e.g. HERMES_PROPERTY_EXAMPLES=400).
MAX_EXAMPLES = int(os.environ.get("HERMES_PROPERTY_EXAMPLES", "30"))
PROPERTY_SETTINGS = settings(
    max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def text(min_words=1, max_words=20):
    return st.lists(st.sampled_from(WORDS), min_size=min_words, max_size=max_words).map(" ".join)


huge_output = st.integers(min_value=10, max_value=1_500).map(lambda n: "output line with words\n" * n)


@st.composite
def tool_result_content(draw, previous: list[str]):
    kind = draw(st.sampled_from(["small", "huge", "image", "duplicate"]))
    if kind == "huge":
        return draw(huge_output)
    if kind == "image":
        return [{"type": "text", "text": draw(text())}, draw(st.sampled_from([IMAGE, URL_IMAGE]))]
    if kind == "duplicate" and previous:
        return draw(st.sampled_from(previous))
    return draw(text())


@st.composite
def conversations(draw) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": draw(text(3, 30))})
    outputs: list[str] = []
    ids = 0
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        kind = draw(st.sampled_from(["text", "text", "pasted", "image"]))
        if kind == "text":
            msgs.append({"role": "user", "content": draw(text())})
        elif kind == "pasted":
            msgs.append({"role": "user", "content": draw(text()) + "\n" + draw(huge_output)})
        else:
            msgs.append({"role": "user", "content": [{"type": "text", "text": draw(text())}, IMAGE]})
        for _ in range(draw(st.integers(min_value=0, max_value=4))):
            if draw(st.booleans()):
                calls = []
                for _ in range(draw(st.integers(min_value=1, max_value=3))):
                    ids += 1
                    args = {"path": draw(text(1, 3)), "content": draw(st.sampled_from(["", "x" * 900, "short"]))}
                    calls.append({"id": f"toolu_{ids}", "type": "function",
                                  "function": {"name": draw(st.sampled_from(TOOLS)), "arguments": json.dumps(args)}})
                msgs.append({"role": "assistant", "content": draw(st.one_of(st.none(), text())), "tool_calls": calls})
                for c in calls:
                    content = draw(tool_result_content(outputs))
                    if isinstance(content, str) and len(content) >= 200:
                        outputs.append(content)
                    msgs.append({"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": content})
            else:
                msgs.append({"role": "assistant", "content": draw(text())})
    return msgs


def strip_meta(msg):
    return {k: v for k, v in msg.items() if not k.startswith("_")}


def real_tokens(messages):
    """An independent recount: tiktoken on each message without any stored count."""
    return sum(compute_message_tokens(strip_meta(m)) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def validate(messages):
    body = to_anthropic_request(messages, model="claude-sonnet-4-5", max_tokens=1_024)
    validate_messages_request(body)


def make_engine(protect_first_n, protect_last_n, summary_words=30):
    summary = "## Goal\n" + " ".join(["progress"] * summary_words)
    return ContextCompressor(
        64_000,
        target_ratio=0.10,
        protect_first_n=protect_first_n,
        protect_last_n=protect_last_n,
        summariser=lambda prompt, budget: summary,
    )


def last_user_text(messages):
    for m in reversed(messages):
        if m["role"] == "user" and not m.get(SUMMARY_KEY):
            c = m["content"]
            return c if isinstance(c, str) else c[0]["text"]
    return None


def check_output(before, res):
    out = res.messages
    assert tool_pair_problems(out) == []
    assert sum(1 for m in out if m.get(SUMMARY_KEY)) == 1
    assert real_tokens(out) <= real_tokens(before)
    assert res.tokens_after <= res.tokens_before
    validate(out)
    wanted = last_user_text(before)
    if wanted:
        assert any(wanted in content_text(m.get("content")) for m in out if m["role"] == "user")


@PROPERTY_SETTINGS
@given(conversations(), st.integers(0, 3), st.integers(1, 20))
def test_it_keeps_every_promise_on_random_conversations(messages, protect_first_n, protect_last_n):
    validate(messages)  # the generator only produces valid conversations
    snapshot = copy.deepcopy(messages)
    res = make_engine(protect_first_n, protect_last_n).compress(messages, force=True)
    assert messages == snapshot
    assert res.status in ("compressed", "noop", "aborted")
    if res.status != "compressed":
        assert res.messages is messages
        return
    check_output(messages, res)


@PROPERTY_SETTINGS
@given(conversations(), conversations(), st.integers(0, 3), st.integers(1, 20))
def test_it_never_stacks_summaries_over_repeated_compressions(first, more, protect_first_n, protect_last_n):
    engine = make_engine(protect_first_n, protect_last_n)
    res = engine.compress(first, force=True)
    history = res.messages + [m for m in more if m["role"] != "system"]
    history = sanitize_tool_pairs(history)
    snapshot = copy.deepcopy(history)
    again = engine.compress(history, force=True)
    assert history == snapshot
    if again.status == "compressed":
        check_output(history, again)
    else:
        assert again.messages is history


@PROPERTY_SETTINGS
@given(conversations(), st.sampled_from([RuntimeError("boom"), TimeoutError("slow"), ValueError("")]))
def test_it_returns_the_input_untouched_whenever_the_summary_fails(messages, error):
    def failing(prompt, budget):
        raise error

    snapshot = copy.deepcopy(messages)
    res = ContextCompressor(64_000, target_ratio=0.10, summariser=failing).compress(messages, force=True)
    assert res.status in ("aborted", "noop")
    assert res.messages is messages and messages == snapshot


@PROPERTY_SETTINGS
@given(conversations())
def test_it_keeps_fallback_outputs_valid(messages):
    def failing(prompt, budget):
        raise RuntimeError("down")

    res = ContextCompressor(64_000, target_ratio=0.10, summariser=failing, on_summary_failure="fallback").compress(
        messages, force=True
    )
    if res.status == "compressed":
        assert res.fallback_used
        check_output(messages, res)
