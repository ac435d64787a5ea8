import pytest

from compression.core.compressor import ContextCompressor
from compression.core.thresholds import (
    ContextWindowTooSmall,
    clamp_target_ratio,
    compute_max_summary_tokens,
    compute_tail_token_budget,
    compute_threshold_tokens,
    resolve_threshold,
)


@pytest.mark.parametrize(
    ("context_length", "max_tokens", "expected"),
    [
        (200_000, None, 100_000),  # no 0.75 small-window floor
        (262_144, None, 131_072),
        (64_000, None, 54_400),  # the 64K floor reaches the window: 85 %
        (200_000, 65_536, 67_232),  # 64K floor on a 134,464 effective window
        (1_000_000, None, 500_000),
        (100_000, None, 64_000),  # 50 % is under the floor, the floor is under the window
    ],
)
def test_it_computes_the_worked_threshold_examples(context_length, max_tokens, expected):
    assert compute_threshold_tokens(context_length, 0.50, max_tokens) == expected


def test_it_ignores_an_output_reservation_that_eats_the_whole_window():
    assert compute_threshold_tokens(200_000, 0.5, 200_000) == compute_threshold_tokens(200_000, 0.5)
    assert compute_threshold_tokens(200_000, 0.5, 300_000) == 100_000


@pytest.mark.parametrize("bogus", [0, -5, "65536", 1.5, True, None])
def test_it_treats_non_positive_int_max_tokens_as_no_reservation(bogus):
    assert compute_threshold_tokens(200_000, 0.5, bogus) == 100_000


def test_it_keeps_the_small_window_trigger_below_the_window():
    threshold = compute_threshold_tokens(64_000, 0.5, 40_000)
    assert threshold == int(24_000 * 0.85)
    assert threshold < 24_000


def test_it_derives_tail_and_summary_budgets():
    assert compute_tail_token_budget(100_000, 0.20) == 20_000
    assert compute_max_summary_tokens(200_000) == 10_000
    assert compute_max_summary_tokens(1_000_000) == 12_000
    assert compute_max_summary_tokens(64_000) == 3_200


def test_it_clamps_the_target_ratio():
    assert clamp_target_ratio(0.01) == 0.10
    assert clamp_target_ratio(0.95) == 0.80
    assert clamp_target_ratio(0.33) == 0.33


def test_it_exposes_the_budgets_on_the_compressor():
    engine = ContextCompressor(200_000)
    assert (engine.threshold_tokens, engine.tail_token_budget, engine.max_summary_tokens) == (100_000, 20_000, 10_000)
    engine = ContextCompressor(200_000, target_ratio=2.0)
    assert engine.tail_token_budget == 80_000


def test_it_refuses_a_main_model_window_under_64k_naming_the_setting():
    with pytest.raises(ContextWindowTooSmall, match="model.context_length"):
        ContextCompressor(32_000)


@pytest.mark.parametrize("model", ["gpt-5.5", "gpt-5.4", "gpt-5.6", "gpt-5.5-pro", "gpt-5.5.1", "openai/gpt-5.5"])
def test_it_autoraises_codex_gpt5x_thresholds_to_85_percent(model):
    decision = resolve_threshold(0.50, provider="openai-codex", model=model)
    assert decision.threshold == 0.85
    assert decision.raised
    assert "compression.codex_gpt55_autoraise" in decision.notice


@pytest.mark.parametrize(
    ("provider", "model"),
    [("openrouter", "gpt-5.5"), ("openai-codex", "gpt-5.3-codex-spark"), ("openai-codex", "gpt-5.55"), ("openai-codex", "gpt-4o")],
)
def test_it_leaves_other_models_and_routes_alone(provider, model):
    assert resolve_threshold(0.50, provider=provider, model=model).threshold == 0.50


def test_it_never_lowers_a_higher_configured_threshold():
    decision = resolve_threshold(0.90, provider="openai-codex", model="gpt-5.5")
    assert decision.threshold == 0.90
    assert not decision.raised
    assert decision.notice is None


def test_it_honours_the_autoraise_switches():
    assert resolve_threshold(0.5, provider="openai-codex", model="gpt-5.5", codex_autoraise=False).threshold == 0.5
    quiet = resolve_threshold(0.5, provider="openai-codex", model="gpt-5.5", codex_autoraise_notice=False)
    assert quiet.threshold == 0.85
    assert quiet.notice is None


def test_it_applies_the_autoraise_in_the_compressor():
    engine = ContextCompressor(272_000, provider="openai-codex", model="gpt-5.5")
    assert engine.threshold_tokens == int(272_000 * 0.85)
