import pytest

from compression.core.hygiene import (
    hygiene_decision,
    made_progress,
    preflight_gate,
)


def fires(**numbers) -> bool:
    return hygiene_decision(**numbers).fire


def test_it_fires_hygiene_at_85_percent_of_the_window_regardless_of_the_threshold():
    assert fires(message_count=10, context_length=200_000, tokens=170_000)
    assert not fires(message_count=10, context_length=200_000, tokens=169_999)
    # 85 % of 131,073 is 111,412.05: 111,412 tokens are still below it.
    assert not fires(message_count=10, context_length=131_073, tokens=111_412)
    assert fires(message_count=10, context_length=131_073, tokens=111_413)


def test_it_judges_the_projected_next_request_and_says_so():
    decision = hygiene_decision(message_count=10, context_length=200_000, tokens=170_000)
    assert decision.fire and decision.source == "projected" and decision.tokens == 170_000
    assert "170,000 projected tokens >= 85% of 200,000 (170,000)" == decision.reason
    assert hygiene_decision(message_count=10, context_length=200_000, tokens=-5).tokens == 0


def test_it_fires_hygiene_at_the_hard_message_limit():
    assert fires(message_count=5_000, context_length=200_000)
    assert not fires(message_count=4_999, context_length=200_000)
    assert fires(message_count=40, context_length=200_000, hard_message_limit=40)


def test_it_needs_four_messages_and_compression_enabled():
    assert not fires(message_count=3, context_length=200_000, tokens=199_000)
    assert not fires(message_count=10, context_length=200_000, tokens=199_000, enabled=False)


def test_it_gates_the_preflight_cheaply():
    common = dict(threshold_tokens=100_000, protect_first_n=3, protect_last_n=20)
    assert not preflight_gate(message_count=24, rough_message_tokens=10, **common)
    assert preflight_gate(message_count=25, rough_message_tokens=10, **common)
    assert preflight_gate(message_count=5, rough_message_tokens=100_000, **common)


@pytest.mark.parametrize(
    ("messages_before", "messages_after", "tokens_before", "tokens_after", "expected"),
    [(10, 10, 100, 95, False), (10, 10, 100, 94, True), (10, 9, 100, 100, True)],
)
def test_it_defines_progress_for_repeated_passes(messages_before, messages_after, tokens_before, tokens_after, expected):
    assert made_progress(messages_before, messages_after, tokens_before, tokens_after) is expected
