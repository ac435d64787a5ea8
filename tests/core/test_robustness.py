"""Bad input gets through every phase without a crash, and loses nothing."""

import pytest

from compression.core.tokens import (
    compute_message_tokens,
    estimate_messages_tokens_rough,
    estimate_request_tokens_rough,
)
from compression.core.tool_pairs import tool_pair_problems

from .conftest import assistant, call, result, system, user

MALFORMED = [
    pytest.param([None], id="None"),
    pytest.param(["read_file"], id="a string"),
    pytest.param([{"id": "x", "type": "function", "function": None}], id="function None"),
    pytest.param([{"id": "y", "type": "function", "function": "read_file"}], id="function a string"),
    pytest.param([None, call("ok", "read_file", path="a.py")], id="None beside a good call"),
]


def chat_with(calls):
    msgs = [system()]
    for i in range(30):
        msgs += [user(f"request {i} " + "word " * 200), assistant(f"answer {i} " + "word " * 200)]
    bad = {"role": "assistant", "content": "calling", "tool_calls": calls}
    msgs[6:6] = [bad] + [result("ok", "contents of a.py", "read_file")] * any(
        isinstance(c, dict) and c.get("id") == "ok" for c in calls)
    return msgs


@pytest.mark.parametrize("calls", MALFORMED)
def test_malformed_tool_call_entries_never_crash_the_estimators(calls):
    msg = {"role": "assistant", "content": "calling", "tool_calls": calls}
    assert compute_message_tokens(msg) > 0
    assert estimate_messages_tokens_rough([msg]) > 0
    assert estimate_request_tokens_rough([msg], system_prompt="s") > 0


@pytest.mark.parametrize("calls", MALFORMED)
@pytest.mark.parametrize("on_failure", ["abort", "fallback"])
def test_malformed_tool_call_entries_never_crash_compress(make_compressor, summariser, calls, on_failure):
    msgs = chat_with(calls)
    engine = make_compressor(on_summary_failure=on_failure)
    res = engine.compress(msgs, force=True)
    assert res.status == "compressed"
    assert tool_pair_problems(res.messages) == []
    preview = engine.preview(msgs)
    assert preview.has_content


@pytest.mark.parametrize("calls", MALFORMED)
def test_the_local_fallback_summary_reads_past_malformed_calls(make_compressor, summariser, calls):
    summariser.error = RuntimeError("down")
    res = make_compressor(on_summary_failure="fallback").compress(chat_with(calls), force=True)
    assert res.status == "compressed" and res.fallback_used
