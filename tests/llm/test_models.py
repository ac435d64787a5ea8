"""The default model catalog."""

from __future__ import annotations

import json

from llm.models import DEFAULT_MODELS, ModelCatalog, catalog_from_json, get_model


def test_it_knows_the_simulator_models():
    small, large = get_model("sim-claude-64k"), get_model("sim-claude-200k")
    assert (small.context_window, large.context_window) == (64_000, 200_000)
    assert small.simulated and large.simulated


def test_it_carries_the_reference_figures_for_real_models():
    opus = get_model("claude-opus-4-5")
    assert (opus.context_window, opus.max_output, opus.min_cache_tokens) == (200_000, 64_000, 4096)
    assert (opus.price.input, opus.price.cache_write_5m, opus.price.cache_write_1h, opus.price.cache_read, opus.price.output) == (5, 6.25, 10, 0.5, 25)
    assert get_model("claude-sonnet-4-6").context_window == 1_000_000


def test_it_resolves_dated_ids_and_aliases():
    assert get_model("claude-opus-4-5-20251101").name == "claude-opus-4-5"
    assert get_model("claude-sonnet-4-6-20990101").name == "claude-sonnet-4-6"
    assert get_model("gpt-unknown") is None


def test_it_every_model_has_a_sane_shape():
    for model in DEFAULT_MODELS:
        assert model.context_window > model.max_output > 0
        assert model.min_cache_tokens >= 512
        assert model.price.cache_read < model.price.input < model.price.cache_write_1h


def test_it_adds_and_overrides_models_from_json():
    catalog = catalog_from_json(json.dumps([
        {"name": "sim-claude-tiny", "context_window": 8000, "max_output": 1000, "min_cache_tokens": 100},
        {"name": "sim-claude-64k", "min_cache_tokens": 2048},
    ]))
    assert catalog.get("sim-claude-tiny").context_window == 8000
    assert catalog.get("sim-claude-tiny").price.cache_read == catalog.get("sim-claude-200k").price.cache_read
    overridden = catalog.get("sim-claude-64k")
    assert (overridden.context_window, overridden.min_cache_tokens) == (64_000, 2048)
    assert "claude-opus-4-8" in catalog


def test_it_accepts_a_mapping_of_names_with_prices():
    catalog = catalog_from_json('{"sim-claude-cheap": {"context_window": 100000, "max_output": 4000, "price": {"input": 1, "output": 2}}}')
    price = catalog.get("sim-claude-cheap").price
    assert (price.input, price.cache_write_5m, price.cache_write_1h, price.cache_read) == (1, 1.25, 2, 0.1)
    assert len(ModelCatalog([])) == 0
