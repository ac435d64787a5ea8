"""The whole middle reaches the summariser: one call when it fits, chunks oldest first when not."""

import re

import pytest

from compression.core.base import PHASE_ASSEMBLING, PHASE_PRUNING, PHASE_SUMMARISING, parse_chunk_phase
from compression.core.chunked import plan_summary
from compression.core.summary import SummaryResult, SummaryTruncated, summary_max_tokens
from compression.core.tokens import count_tokens

from .conftest import RecordingSummariser, assistant, sized, system, user

WORDS = "the parser reads config values from settings file and reports each error with its line number".split()
TURN = re.compile(r"turn-(\d+):")


def prose(n_words: int, seed: int) -> str:
    return " ".join(WORDS[(seed + k) % len(WORDS)] for k in range(n_words))


def chat_of(turns: int, words: int = 600) -> list[dict]:
    """System + alternating user/assistant turns, each tagged ``turn-<i>:`` and ~600 tokens long."""
    msgs = [system()]
    for i in range(turns):
        make = user if i % 2 == 0 else assistant
        msgs.append(make(f"turn-{i}: " + prose(words, i)))
    return msgs


def turn_section(prompt: str) -> str:
    """The serialised turns of one summary prompt (between their heading and the template)."""
    head = "NEW TURNS TO INCORPORATE:\n" if "NEW TURNS TO INCORPORATE:\n" in prompt else "TURNS TO SUMMARIZE:\n"
    return prompt.split(head, 1)[1].split("\n\nUse exactly this structure", 1)[0]


def turns_seen(prompts: list[str]) -> list[int]:
    return [int(m.group(1)) for p in prompts for m in TURN.finditer(turn_section(p))]


def test_the_default_200k_model_at_its_threshold_sends_every_summarised_turn(make_compressor, summariser):
    engine = make_compressor(200_000, summariser_context_length=200_000)  # auxiliary = the main model
    msgs = chat_of(170)
    assert engine.count_messages_tokens(msgs) >= engine.threshold_tokens  # at the 100,000 threshold
    preview = engine.preview(msgs)
    start, end = preview.head_messages, len(msgs) - preview.tail_messages
    res = engine.compress(msgs)
    assert res.status == "compressed"
    seen = turns_seen([p for p, _ in summariser.calls])
    assert len(summariser.calls) == 1
    assert seen == [int(TURN.match(m["content"]).group(1)) for m in msgs[start:end]]
    assert len(seen) == res.summarized_count > 130
    assert res.messages_read == res.summarized_count
    assert res.summariser_calls == 1
    assert res.tokens_read >= 600 * res.summarized_count


def test_a_middle_larger_than_the_summariser_is_read_in_chunks_oldest_first(make_compressor, summariser):
    phases: list[str] = []
    engine = make_compressor(200_000, summariser_context_length=64_000)
    msgs = chat_of(170)
    res = engine.compress(msgs, on_progress=phases.append, force=True)
    assert res.status == "compressed"
    prompts = [p for p, _ in summariser.calls]
    n = len(prompts)
    assert n >= 3
    seen = turns_seen(prompts)
    assert seen == sorted(seen)  # oldest first, in order
    assert len(seen) == len(set(seen)) == res.summarized_count  # every message read exactly once
    assert res.messages_read == res.summarized_count and res.summariser_calls == n
    sent = sum(count_tokens(turn_section(p)) for p in prompts)
    assert abs(res.tokens_read - sent) <= sent // 100  # the tokens of the turns the prompts carried
    # The first call starts a summary; every later one updates the running summary.
    assert "TURNS TO SUMMARIZE:" in prompts[0] and "PREVIOUS SUMMARY" not in prompts[0]
    for prompt in prompts[1:]:
        assert "PREVIOUS SUMMARY:\n" + summariser.answer.split("\n")[0] in prompt
        assert "NEW TURNS TO INCORPORATE:" in prompt
    # Each prompt fits the summariser's window with room for the answer.
    for prompt, budget in summariser.calls:
        assert count_tokens(prompt) + summary_max_tokens(budget) <= 64_000
    # Progress: chunk k of n before each call, in order, between summarising and assembling. n is
    # re-estimated once each running summary is known, and is exact for the last call.
    chunk_phases = [parse_chunk_phase(p) for p in phases if parse_chunk_phase(p)]
    assert [k for k, _ in chunk_phases] == list(range(1, n + 1))
    assert chunk_phases[-1] == (n, n) and all(k <= of for k, of in chunk_phases)
    assert phases[0] == PHASE_PRUNING and phases[1] == PHASE_SUMMARISING and phases[-1] == PHASE_ASSEMBLING


def test_chunks_are_sized_from_the_summary_each_call_actually_carries(make_compressor):
    short = RecordingSummariser(answer="## Goal\nRead the parser.")
    long = RecordingSummariser(answer="## Goal\n" + prose(15_000, 1))
    calls = []
    for summariser in (short, long):
        engine = make_compressor(200_000, summariser_context_length=64_000, summariser=summariser)
        engine.compress(chat_of(170), force=True)
        calls.append(len(summariser.calls))
    assert calls[0] < calls[1]  # a long running summary leaves less room per call, so more calls
    for prompt, budget in long.calls:
        assert count_tokens(prompt) + summary_max_tokens(budget) <= 64_000


def test_a_single_message_larger_than_a_chunk_is_cut_inside_itself_with_a_marker():
    huge = assistant("turn-1: " + "[Tool calls:\n" + "\n".join(f"  run_{i}(" + prose(250, i) + ")" for i in range(8)))
    huge["tool_calls"] = [{"id": f"c{i}", "type": "function", "function": {"name": f"run_{i}", "arguments": prose(300, i)}}
                          for i in range(60)]
    turns = [user("turn-0: start"), huge, user("turn-2: " + prose(50, 2))]
    plan = plan_summary(turns, window=20_000, budget=2_000)
    assert plan.feasible and not plan.single
    joined = "\n\n".join(c.text for c in plan.chunks)
    assert all(f"turn-{i}:" in joined for i in range(3))  # no message left out
    assert "[message cut to fit the summariser: about" in joined
    assert joined.count("[message cut to fit the summariser") == 1  # only the oversized one
    assert max(c.tokens for c in plan.chunks) <= plan.floor
    assert "run_59(" in joined  # its tail survives the cut, not only its head


def test_a_summariser_window_too_small_for_any_chunk_is_a_summary_failure(make_compressor, summariser):
    engine = make_compressor(200_000, summariser_context_length=8_000)
    msgs = chat_of(170)
    res = engine.compress(msgs, force=True)
    assert res.status == "aborted" and "cannot hold the prompt" in res.reason
    assert res.messages is msgs
    assert summariser.calls == []
    assert engine.cooldown_remaining() == 600


@pytest.mark.parametrize("stop_reason", ["max_tokens", "length"])
def test_a_summary_cut_off_at_its_output_cap_is_a_failure_never_the_handoff(make_compressor, stop_reason):
    half = SummaryResult(text="## Goal\nShip the feature.\n\n## Progress\n### Done\n- read src/f1", stop_reason=stop_reason)
    summariser = RecordingSummariser()
    summariser.answer = half
    engine = make_compressor(summariser=summariser)
    msgs = chat_of(170)
    res = engine.compress(msgs)
    assert res.status == "aborted" and res.messages is msgs
    assert "SummaryTruncated" in res.reason
    assert engine.cooldown_remaining() == 60


def test_a_truncated_summary_takes_the_configured_local_fallback_instead(make_compressor):
    summariser = RecordingSummariser()
    summariser.answer = SummaryResult(text="## Goal\nhalf a sen", stop_reason="max_tokens")
    res = make_compressor(summariser=summariser, on_summary_failure="fallback").compress(chat_of(170))
    assert res.status == "compressed" and res.fallback_used
    assert "half a sen" not in res.summary


def test_a_summariser_may_raise_summary_truncated_itself(make_compressor):
    res = make_compressor(summariser=RecordingSummariser(error=SummaryTruncated("cut"))).compress(chat_of(170))
    assert res.status == "aborted" and "SummaryTruncated" in res.reason


def test_a_complete_summary_result_and_a_plain_string_are_both_accepted(make_compressor):
    for answer in (SummaryResult("## Goal\nDone it.", "end_turn"), "## Goal\nDone it."):
        summariser = RecordingSummariser()
        summariser.answer = answer
        res = make_compressor(summariser=summariser).compress(chat_of(170))
        assert res.status == "compressed" and "Done it." in res.summary


def test_a_failing_auxiliary_summariser_is_retried_once_on_the_fallback_summariser(make_compressor):
    aux = RecordingSummariser(error=RuntimeError("404 model_not_found: aux-model"))
    main = RecordingSummariser(answer="## Goal\nWritten by the main model.")
    engine = make_compressor(200_000, summariser=aux, fallback_summariser=main, summariser_context_length=64_000)
    res = engine.compress(chat_of(170), force=True)
    assert res.status == "compressed" and "Written by the main model." in res.summary
    assert len(aux.calls) == 1  # the auxiliary route is not retried chunk after chunk
    assert len(main.calls) >= 2 and res.summariser_calls == 1 + len(main.calls)
    assert "model_not_found" in res.summariser_fallback_reason
    assert engine.cooldown_remaining() == 0


def test_when_both_summarisers_fail_it_aborts_with_the_last_failure(make_compressor):
    aux = RecordingSummariser(error=RuntimeError("aux down"))
    main = RecordingSummariser(error=TimeoutError("main slow"))
    msgs = chat_of(170)
    res = make_compressor(summariser=aux, fallback_summariser=main).compress(msgs)
    assert res.status == "aborted" and res.messages is msgs
    assert "main slow" in res.reason and "aux down" in res.summariser_fallback_reason


def test_the_preview_says_how_many_summariser_calls_a_compression_would_take(make_compressor, summariser):
    msgs = chat_of(170)
    assert make_compressor(200_000, summariser_context_length=200_000).preview(msgs).summariser_calls == 1
    chunked = make_compressor(200_000, summariser_context_length=64_000)
    preview = chunked.preview(msgs)
    assert preview.summariser_calls >= 3
    assert summariser.calls == []
    chunked.compress(msgs, force=True)
    assert abs(len(summariser.calls) - preview.summariser_calls) <= 1


def test_stored_counts_do_not_change_what_the_summariser_reads(make_compressor, summariser):
    msgs = [sized(m, 600) for m in chat_of(170)]
    res = make_compressor(200_000).compress(msgs)
    assert res.messages_read == res.summarized_count


def test_an_unknown_summariser_window_is_read_as_the_64k_minimum_and_never_overflows(make_compressor, summariser):
    engine = make_compressor(1_000_000)
    assert engine.summariser_context_length == 64_000
    assert engine.lowered_to_aux_window is None and engine.threshold_tokens == 500_000  # not a known cap
    res = engine.compress(chat_of(400), force=True)  # a 100,000-token tail, a ~140,000-token middle
    assert res.summariser_calls > 1 and res.messages_read == res.summarized_count > 150
    for prompt, budget in summariser.calls:
        assert count_tokens(prompt) + summary_max_tokens(budget) <= 64_000
