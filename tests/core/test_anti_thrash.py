"""Anti-thrash that cannot thrash: a compaction is judged on the next real prompt (SPEC §5)."""

from compression.core.compressor import ANTI_THRASH_LIMIT, ContextCompressor
from compression.core.tokens import estimate_messages_tokens_rough as rough

from .conftest import assistant, system, user

SYSTEM_AND_TOOLS = 99_000  # system prompt + tool schemas: alone they sit just under the 100,000 threshold
WORDS = "please look at the parser module and explain why the settings loader fails on empty files".split()


def text(label: str, n: int = 220) -> str:
    return label + ": " + " ".join(WORDS[k % len(WORDS)] for k in range(n))


def history(turns: int) -> list[dict]:
    msgs = [system()]
    for i in range(turns):
        msgs += [user(text(f"question {i}")), assistant(text(f"answer {i}"))]
    return msgs


def run_turns(engine: ContextCompressor, msgs: list[dict], turns: int) -> list[dict]:
    """The host's loop: a model call per turn (real prompt = fixed part + messages), then the
    post-response check; a compaction replaces the messages."""
    for i in range(turns):
        msgs = [*msgs, user(text(f"next {i}")), assistant(text(f"reply {i}"))]
        engine.update_from_response({"input_tokens": SYSTEM_AND_TOOLS + engine.count_messages_tokens(msgs)})
        if engine.should_compress():
            result = engine.compress(msgs)
            if result.compressed:
                # each one "saves" > 10 % of the message tokens (the rough estimate the engine judges by)
                assert rough(result.messages) < 0.9 * rough(msgs)
                msgs = result.messages
    return msgs


def test_a_prompt_that_stays_over_the_threshold_stops_compaction_within_three_attempts(make_compressor, summariser):
    engine = make_compressor(200_000)
    run_turns(engine, history(20), 6)
    assert len(summariser.calls) <= 3  # was 6 of 6 turns, a summariser call each
    assert len(summariser.calls) == ANTI_THRASH_LIMIT
    assert not engine.should_compress(150_000)
    reason = engine.blocked_reason()
    assert reason and "still over the compression threshold" in reason and "100,000" in reason
    assert engine.get_status()["blocked_reason"] == reason


def test_the_verdict_survives_a_reload_between_the_compaction_and_the_next_prompt(make_compressor, clock):
    engine = make_compressor(200_000)
    engine.update_from_response({"input_tokens": 120_000})
    assert engine.compress(history(20)).compressed
    state = engine.export_state()
    reloaded = make_compressor(200_000)
    reloaded.load_state(state)
    reloaded.update_from_response({"input_tokens": 110_000})
    assert reloaded.ineffective_count == 1


def test_one_strike_per_compaction_and_a_fitting_prompt_clears_the_latch(make_compressor):
    engine = make_compressor(200_000)
    assert engine.compress(history(20)).compressed
    engine.update_from_response({"input_tokens": 130_000})
    engine.update_from_response({"input_tokens": 130_000})  # no compaction in between: no new strike
    assert engine.ineffective_count == 1
    engine.update_from_response({"input_tokens": 60_000})
    assert engine.ineffective_count == 0 and engine.blocked_reason() is None


def test_an_empty_usage_consumes_the_verdict_without_a_strike(make_compressor):
    engine = make_compressor(200_000)
    assert engine.compress(history(20)).compressed
    engine.update_from_response({})
    engine.update_from_response({"input_tokens": 130_000})
    assert engine.ineffective_count == 0


def test_a_manual_compress_still_runs_when_blocked(make_compressor, summariser):
    engine = make_compressor(200_000)
    msgs = run_turns(engine, history(20), 6)
    calls = len(summariser.calls)
    assert engine.compress(msgs).reason == "ineffective"
    assert engine.compress(history(20), force=True).compressed
    assert len(summariser.calls) == calls + 1
