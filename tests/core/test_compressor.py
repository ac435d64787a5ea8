import copy
from dataclasses import FrozenInstanceError, dataclass

import pytest

from compression.core.compressor import ContextCompressor
from compression.core.compressor_state import INEFFECTIVE_LOW_SAVINGS
from compression.core.engine import CompressionResult
from compression.core.markers import END_MARKER, FALLBACK_KEY, SUMMARY_KEY, SUMMARY_PREFIX, SYSTEM_NOTE
from compression.core.summary import SummariserUnavailable, SummaryFailed
from compression.core.tokens import estimate_messages_tokens_rough as rough
from compression.core.tool_pairs import tool_pair_problems

from .conftest import assistant, call, result, sized, system, user


def long_chat(turns=40, tokens=2_000):
    """System + ``turns`` × (user, assistant with a tool call, tool result, assistant), sizes stored."""
    msgs = [sized(system(), 50)]
    for i in range(turns):
        msgs.append(sized(user(f"request {i}"), tokens))
        msgs.append(sized(assistant(f"working on {i}", [call(f"c{i}", "read_file", path=f"f{i}.py")]), 50))
        msgs.append(sized(result(f"c{i}", f"short output {i}", "read_file"), tokens))
        msgs.append(sized(assistant(f"finished {i}"), tokens))
    return msgs


def summaries(msgs):
    return [m for m in msgs if m.get(SUMMARY_KEY)]


def test_it_compresses_into_head_summary_and_tail(make_compressor, summariser):
    engine = make_compressor()
    msgs = long_chat()
    res = engine.compress(msgs)
    assert res.status == "compressed"
    out = res.messages
    assert out[0]["role"] == "system" and out[0]["content"].endswith(SYSTEM_NOTE)
    assert [m["content"] for m in out[1:4]] == ["request 0", "working on 0", "short output 0"]  # first 3 protected
    assert len(summaries(out)) == 1
    summary = summaries(out)[0]
    assert summary["content"].startswith(SUMMARY_PREFIX) and summary["content"].endswith(END_MARKER)
    assert summariser.answer in summary["content"]
    assert out[-1]["content"] == "finished 39"
    assert res.summary.startswith(SUMMARY_PREFIX)
    assert res.messages_before == len(msgs) and res.messages_after == len(out)
    assert res.tokens_before > res.tokens_after > 0
    assert tool_pair_problems(out) == []
    assert len(summariser.calls) == 1


def test_it_reports_counts_that_add_up(make_compressor):
    msgs = long_chat()
    res = make_compressor().compress(msgs)
    # head + summary + tail == output, and head + summarised + tail == input (no stubs needed here).
    assert res.messages_after == res.messages_before - res.summarized_count + 1


def test_it_never_mutates_its_input(make_compressor):
    msgs = long_chat()
    snapshot = copy.deepcopy(msgs)
    res = make_compressor().compress(msgs)
    assert msgs == snapshot
    res.messages[-1]["content"] = "changed"
    assert msgs == snapshot


def test_it_returns_a_frozen_result(make_compressor):
    res = make_compressor().compress(long_chat())
    assert isinstance(res, CompressionResult)
    with pytest.raises(FrozenInstanceError):
        res.status = "noop"


def test_it_stores_a_token_count_on_every_output_message(make_compressor):
    res = make_compressor().compress(long_chat())
    assert all(isinstance(m.get("_tokens"), int) for m in res.messages)


def test_it_sets_the_sentinel_and_counts_compressions(make_compressor):
    engine = make_compressor()
    engine.update_from_response({"input_tokens": 150_000})
    engine.compress(long_chat())
    assert engine.compression_count == 1
    assert engine.last_prompt_tokens == -1
    assert engine.get_status()["last_prompt_tokens"] == 0
    assert not engine.should_compress()  # −1 counts as 0: no immediate re-compression


def test_it_decays_the_head_and_updates_the_summary_iteratively(make_compressor, summariser):
    engine = make_compressor()
    first = engine.compress(long_chat()).messages
    more = first + long_chat(turns=30)[1:]
    summariser.answer = "## Goal\nsecond"
    second = engine.compress(more)
    assert second.status == "compressed"
    assert second.messages[0]["role"] == "system"
    assert second.messages[1].get(SUMMARY_KEY)  # head decayed to the system message alone
    assert second.messages[1]["role"] == "user"
    assert all(m.get("content") != "request 0" for m in second.messages)
    prompt = summariser.last_prompt
    assert "PREVIOUS SUMMARY:\n## Goal\nShip the feature." in prompt
    assert "NEW TURNS TO INCORPORATE:" in prompt
    assert len(summaries(second.messages)) == 1
    assert second.messages[0]["content"].count(SYSTEM_NOTE) == 1


def test_it_does_not_leak_a_remembered_summary_from_another_session(make_compressor, summariser):
    engine = make_compressor()
    engine.load_state({"compression_count": 1, "previous_summary": "## Goal\nsomeone else's task"})
    engine.compress(long_chat())
    assert "someone else's task" not in summariser.last_prompt
    assert "PREVIOUS SUMMARY" not in summariser.last_prompt


def test_it_passes_the_focus_topic_and_extra_context(make_compressor, summariser):
    make_compressor().compress(long_chat(), focus_topic="database migration", extra_context="Memory: user is Alice.")
    assert 'FOCUS TOPIC: "database migration"' in summariser.last_prompt
    assert "Memory: user is Alice." in summariser.last_prompt


def test_it_gives_the_summariser_a_clamped_budget(make_compressor, summariser):
    make_compressor().compress(long_chat())
    assert summariser.calls[-1][1] == 10_000  # 20 % of >50K summarised tokens, capped at 5 % of 200K


def test_it_reports_progress_phases_in_order(make_compressor):
    phases = []
    make_compressor().compress(long_chat(), on_progress=phases.append)
    assert phases == ["pruning", "summarising", "assembling"]


def test_it_survives_a_broken_progress_callback(make_compressor):
    def broken(phase):
        raise RuntimeError("socket closed")

    assert make_compressor().compress(long_chat(), on_progress=broken).status == "compressed"


def test_it_aborts_on_summary_failure_returning_the_input_unchanged(make_compressor, summariser):
    summariser.error = TimeoutError("aux model timed out")
    engine = make_compressor()
    msgs = long_chat()
    snapshot = copy.deepcopy(msgs)
    res = engine.compress(msgs)
    assert res.status == "aborted"
    assert res.messages is msgs and msgs == snapshot
    assert "aux model timed out" in res.reason
    assert res.summary is None
    assert engine.compression_count == 0
    assert engine.last_failure and "timed out" in engine.last_failure


@pytest.mark.parametrize("answer", ["", "  \n"])
def test_it_treats_an_empty_summary_as_a_failure(make_compressor, summariser, answer):
    summariser.answer = answer
    res = make_compressor().compress(long_chat())
    assert res.status == "aborted" and "empty" in res.reason


def test_it_cools_down_60s_after_a_transient_failure(make_compressor, summariser, clock):
    summariser.error = SummaryFailed("HTTP 529 overloaded")
    engine = make_compressor()
    engine.compress(long_chat())
    summariser.error = None
    calls = len(summariser.calls)
    clock.advance(59)
    res = engine.compress(long_chat())
    assert (res.status, res.reason) == ("aborted", "cooldown")
    assert len(summariser.calls) == calls
    engine.update_from_response({"input_tokens": 150_000})
    assert not engine.should_compress()
    assert "cooling down" in engine.blocked_reason()
    clock.advance(2)
    assert engine.should_compress()
    assert engine.compress(long_chat()).status == "compressed"


def test_it_cools_down_600s_when_no_auxiliary_model_is_configured(make_compressor, clock):
    engine = make_compressor(summariser=None)
    res = engine.compress(long_chat())
    assert res.status == "aborted" and "no auxiliary model" in res.reason
    clock.advance(599)
    assert engine.compress(long_chat()).reason == "cooldown"
    clock.advance(2)
    assert engine.cooldown_remaining() == 0


def test_it_cools_down_600s_when_the_summariser_says_it_is_unavailable(make_compressor, summariser, clock):
    summariser.error = SummariserUnavailable("auxiliary.compression.model is not set")
    engine = make_compressor()
    engine.compress(long_chat())
    assert engine.cooldown_remaining() == 600


def test_it_lets_a_manual_compress_ignore_the_cooldown(make_compressor, summariser):
    summariser.error = RuntimeError("boom")
    engine = make_compressor()
    engine.compress(long_chat())
    summariser.error = None
    res = engine.compress(long_chat(), force=True)
    assert res.status == "compressed"
    assert engine.cooldown_remaining() == 0


def test_it_inserts_a_marked_fallback_summary_when_configured(make_compressor, summariser):
    summariser.error = RuntimeError("provider down")
    engine = make_compressor(on_summary_failure="fallback")
    res = engine.compress(long_chat())
    assert res.status == "compressed" and res.fallback_used
    carrier = summaries(res.messages)[0]
    assert carrier.get(FALLBACK_KEY)
    assert "Fallback summary generated locally" in carrier["content"]
    assert "read_file f1.py" in carrier["content"]
    assert "provider down" in res.reason
    assert engine.cooldown_remaining() == 60


def test_it_rejects_an_unknown_failure_mode():
    with pytest.raises(ValueError):
        ContextCompressor(200_000, on_summary_failure="drop")


def test_it_refuses_a_summary_that_would_grow_the_context(make_compressor, summariser):
    msgs = [system(), user("a"), assistant("b"), user("c"), assistant("d"), user("e"), assistant("f"), user("g"), assistant("h"), user("i"), assistant("j")]
    summariser.answer = "## Goal\n" + "very long summary " * 2_000
    res = make_compressor().compress(msgs, force=True)
    assert res.status == "aborted" and res.reason.startswith("no reduction")
    assert res.messages is msgs


def incompressible_chat():
    """A small middle before three huge recent messages: any compression saves < 10 %."""
    huge = "z" * 200_000
    msgs = [system(), user("start"), assistant("ok"), user("more")]
    for i in range(4):
        msgs += [user(f"m{i} " + "q" * 800), assistant(f"r{i} " + "w" * 800)]
    msgs += [user(huge), assistant(huge), user(huge + "?")]
    return msgs


def test_it_latches_off_after_two_ineffective_compressions(make_compressor, summariser):
    engine = make_compressor(1_000_000)
    msgs = incompressible_chat()
    first = engine.compress(msgs)
    assert first.status == "compressed" and rough(first.messages) > 0.9 * rough(msgs)  # saved < 10 %
    assert (engine.ineffective_count, engine.ineffective_reason) == (1, INEFFECTIVE_LOW_SAVINGS)
    small = [m for i in range(3) for m in (user(f"n{i} " + "q" * 800), assistant(f"s{i} " + "w" * 800))]
    second = engine.compress(first.messages[:-3] + small + first.messages[-3:])
    assert second.status == "compressed"
    assert engine.ineffective_count == 2
    engine.update_from_response({"input": 600_000})
    assert not engine.should_compress()
    assert "Automatic compression is paused" in engine.blocked_reason()
    calls = len(summariser.calls)
    assert engine.compress(msgs).reason == "ineffective"
    assert len(summariser.calls) == calls
    assert engine.compress(msgs, force=True).status == "compressed"  # manual /compress still works


def test_it_resets_the_latch_on_a_real_prompt_below_the_threshold(make_compressor):
    engine = make_compressor()
    engine.ineffective_count = 2
    engine.update_from_response({"input_tokens": 150_000})
    assert not engine.should_compress()
    engine.update_from_response({"input_tokens": 10_000})
    assert engine.ineffective_count == 0
    assert engine.should_compress(150_000)


def test_it_judges_a_compression_effective_on_the_next_real_prompt(make_compressor):
    engine = make_compressor()
    engine.ineffective_count = 1
    msgs = long_chat()
    assert rough(engine.compress(msgs).messages) < 0.9 * rough(msgs)  # saved > 10 %
    assert engine.ineffective_count == 1  # saving > 10 % alone is no verdict: the real prompt decides
    engine.update_from_response({"input_tokens": 40_000})  # under the 100,000 threshold
    assert engine.ineffective_count == 0


def test_it_counts_an_automatic_noop_as_a_strike_but_not_a_manual_one(make_compressor, summariser):
    engine = make_compressor()
    short = [system(), user("hi"), assistant("hello")]
    assert engine.compress(short).status == "noop"
    assert engine.compress(short).reason == "nothing to compress"
    assert engine.ineffective_count == 2
    engine.ineffective_count = 0
    assert engine.compress(short, force=True).status == "noop"
    assert engine.ineffective_count == 0
    assert summariser.calls == []


def test_it_compares_only_prompt_tokens_with_the_threshold(make_compressor):
    engine = make_compressor()
    assert not engine.should_compress()
    engine.update_from_response({"input_tokens": 99_999, "output_tokens": 50_000})
    assert not engine.should_compress()
    engine.update_from_response({"input_tokens": 60_000, "cache_read_input_tokens": 30_000, "cache_creation_input_tokens": 10_000})
    assert engine.last_prompt_tokens == 100_000
    assert engine.should_compress()
    assert not engine.should_compress(prompt_tokens=5)


@dataclass(frozen=True)
class NormalisedUsage:
    input: int
    output: int
    cache_read: int
    cache_write: int


@pytest.mark.parametrize(
    "usage",
    [
        NormalisedUsage(input=10, output=99, cache_read=100, cache_write=1_000),
        {"input": 10, "output": 99, "cache_read": 100, "cache_write": 1_000},
        {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 1_000},
        {"prompt_tokens": 1_110, "completion_tokens": 5},
    ],
)
def test_it_normalises_usage_shapes_to_the_real_prompt(make_compressor, usage):
    engine = make_compressor()
    engine.update_from_response(usage)
    assert engine.last_prompt_tokens == 1_110


def test_it_falls_back_to_zero_when_a_response_has_no_usage(make_compressor):
    engine = make_compressor()
    engine.compress(long_chat())
    engine.update_from_response({})
    assert engine.last_prompt_tokens == 0


def test_it_defers_the_preflight_to_real_usage_right_after_a_compression(make_compressor):
    engine = make_compressor()
    engine.compress(long_chat())
    assert engine.should_defer_preflight_to_real_usage(150_000)
    engine.update_from_response({"input_tokens": 40_000})
    assert not engine.should_defer_preflight_to_real_usage(50_000)  # under the threshold: nothing to defer


def test_it_defers_only_while_a_compaction_waits_for_real_usage(make_compressor):
    engine = make_compressor()
    assert not engine.should_defer_preflight_to_real_usage(120_000)  # no compaction ran
    engine.update_from_response({"input_tokens": 80_000})
    assert not engine.should_defer_preflight_to_real_usage(125_000)  # the projection is trusted (SPEC §5.2)

def test_it_previews_without_calling_the_summariser_or_changing_state(make_compressor, summariser):
    engine = make_compressor()
    msgs = long_chat()
    preview = engine.preview(msgs, focus_topic="auth")
    assert preview.has_content
    assert preview.messages_before == len(msgs)
    assert 0 < preview.messages_to_summarize < len(msgs)
    assert 0 < preview.tokens_to_summarize < preview.tokens_before
    assert preview.head_messages == 4
    assert preview.head_messages + preview.messages_to_summarize + preview.tail_messages == len(msgs)
    assert summariser.calls == []
    assert engine.compression_count == 0 and engine.last_prompt_tokens == 0
    res = engine.compress(msgs)
    assert res.summarized_count == preview.messages_to_summarize


def test_it_says_when_there_is_nothing_to_compress(make_compressor):
    engine = make_compressor()
    short = [system(), user("a"), assistant("b"), user("c")]
    assert not engine.has_content_to_compress(short)
    assert engine.has_content_to_compress(long_chat())
    assert engine.preview(short).reason == "nothing to compress"


def test_it_exports_and_restores_its_state_into_a_new_instance(make_compressor, summariser, clock):
    engine = make_compressor()
    out = engine.compress(long_chat()).messages
    summariser.error = RuntimeError("flaky")
    engine.compress(out + long_chat(10)[1:], force=True)
    state = engine.export_state()
    assert state["compression_count"] == 1
    assert state["previous_summary"].startswith("## Goal")
    assert state["cooldown_until"] == pytest.approx(clock.now + 1_700_000_000 + 60)
    assert state["last_prompt_tokens"] == -1

    clock.advance(30)
    fresh = make_compressor()
    fresh.load_state(state)
    assert fresh.compression_count == 1
    assert fresh.last_prompt_tokens == -1
    assert fresh.cooldown_remaining() == pytest.approx(30)
    assert fresh.compress(out).reason == "cooldown"


def test_it_resets_session_state(make_compressor):
    engine = make_compressor()
    engine.compress(long_chat())
    engine.on_session_reset()
    assert (engine.compression_count, engine.last_prompt_tokens, engine.previous_summary) == (0, 0, None)


def test_it_recomputes_budgets_and_forgets_calibration_on_a_model_switch(make_compressor):
    engine = make_compressor()
    engine.update_from_response({"input_tokens": 80_000})
    engine.update_model("claude-sonnet-4-6", 1_000_000)
    assert engine.threshold_tokens == 500_000 and engine.tail_token_budget == 100_000
    assert engine.last_prompt_tokens == 0 and engine.last_real_prompt_tokens == 0


def test_it_never_re_tokenises_messages_with_stored_counts(make_compressor, monkeypatch):
    import compression.core.tokens as tokens

    engine = make_compressor()
    msgs = long_chat()
    calls = []
    real = tokens.count_tokens
    monkeypatch.setattr(tokens, "count_tokens", lambda text: calls.append(text) or real(text))
    assert engine.estimate_history_tokens(msgs) == sum(m["_tokens"] + 4 for m in msgs)
    assert calls == []
