"""Usage normalisation (SPEC §3.3) and cost."""

from __future__ import annotations

import pytest

from llm.usage import Price, Usage, compute_cost, normalize_anthropic_usage, normalize_openai_usage


def test_it_keeps_anthropic_input_exclusive_of_cache_and_splits_writes_by_ttl():
    usage = normalize_anthropic_usage({
        "input_tokens": 50, "output_tokens": 20, "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
    })
    assert usage == Usage(input=50, output=20, cache_read=1000, cache_write=300, cache_write_5m=100, cache_write_1h=200)
    assert usage.prompt_tokens == 1350


def test_it_attributes_writes_without_a_breakdown_to_5m():
    usage = normalize_anthropic_usage({"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 70})
    assert (usage.cache_write_5m, usage.cache_write_1h) == (70, 0)


def test_it_reads_sdk_objects_as_well_as_dicts():
    class Obj:
        def model_dump(self):
            return {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": None}
    assert normalize_anthropic_usage(Obj()) == Usage(input=3, output=4)


def test_it_subtracts_openrouter_cache_fields_from_prompt_tokens():
    usage = normalize_openai_usage({
        "prompt_tokens": 10339, "completion_tokens": 60,
        "prompt_tokens_details": {"cached_tokens": 10318, "cache_write_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 7},
    })
    assert usage == Usage(input=21, output=60, cache_read=10318, reasoning=7)
    assert usage.prompt_tokens == 10339


def test_it_falls_back_to_top_level_cache_fields():
    usage = normalize_openai_usage({"prompt_tokens": 100, "completion_tokens": 1,
                                    "cache_read_input_tokens": 40, "cache_creation_input_tokens": 10})
    assert (usage.input, usage.cache_read, usage.cache_write, usage.cache_write_5m) == (50, 40, 10, 10)


def test_it_treats_missing_usage_as_zero():
    assert normalize_openai_usage(None) == Usage()
    assert Usage().prompt_tokens == 0


def test_it_adds_usages():
    total = Usage(input=1, output=2, cache_read=3) + Usage(input=10, cache_write=5, cache_write_1h=5)
    assert total == Usage(input=11, output=2, cache_read=3, cache_write=5, cache_write_1h=5)


def test_it_prices_each_bucket_and_reports_the_no_cache_cost():
    price = Price(input=3, output=15, cache_write_5m=3.75, cache_write_1h=6, cache_read=0.30)
    usage = Usage(input=1_000_000, output=1_000_000, cache_read=1_000_000, cache_write=2_000_000,
                  cache_write_5m=1_000_000, cache_write_1h=1_000_000)
    cost = compute_cost(usage, price)
    assert cost.cost == pytest.approx(3 + 15 + 3.75 + 6 + 0.30)
    assert cost.no_cache_cost == pytest.approx(4 * 3 + 15)
    assert cost.saved == pytest.approx(cost.no_cache_cost - cost.cost)


def test_it_shows_a_cache_hit_saving_and_a_cold_write_costing_more():
    price = Price(input=3, output=15, cache_write_5m=3.75, cache_write_1h=6, cache_read=0.30)
    hit = compute_cost(Usage(input=100, cache_read=10_000, output=10), price)
    cold = compute_cost(Usage(input=100, cache_write=10_000, cache_write_5m=10_000, output=10), price)
    assert hit.saved > 0 > cold.saved


def test_it_accepts_a_price_mapping():
    cost = compute_cost(Usage(input=2_000_000), {"input": 1.5, "output": 2, "cache_write_5m": 0, "cache_write_1h": 0, "cache_read": 0})
    assert cost.cost == pytest.approx(3.0)
