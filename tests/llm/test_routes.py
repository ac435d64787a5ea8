"""The route rule: which routes an installation offers and the one a new conversation gets."""
from __future__ import annotations

from llm.models import get_model
from llm.routes import EndpointSettings, ModelChoice, available_routes, default_route, route_label, simulator_needed

KEY = {"ANTHROPIC_API_KEY": "sk-ant-test"}
SIM_DEFAULT = EndpointSettings(provider="simulator", model="sim-claude-200k")


def test_it_offers_the_simulator_without_a_key_and_anthropic_with_one():
    assert [r.provider for r in available_routes(SIM_DEFAULT, {})] == ["simulator"]
    routes = available_routes(SIM_DEFAULT, KEY)
    assert [r.provider for r in routes] == ["anthropic"]
    assert routes[0].offers("claude-sonnet-4-6") and not routes[0].offers("sim-claude-200k")
    assert simulator_needed({}) and not simulator_needed(KEY)


def test_a_key_moves_new_conversations_to_a_real_claude_model():
    choice = default_route(SIM_DEFAULT, KEY)
    assert (choice.provider, choice.model) == ("anthropic", "claude-sonnet-4-6")
    assert get_model(choice.model) is not None and not get_model(choice.model).simulated


def test_the_admins_default_wins_when_its_route_is_available():
    admin = EndpointSettings(provider="anthropic", model="claude-opus-4-8")
    assert default_route(admin, KEY) == ModelChoice("anthropic", "claude-opus-4-8")
    # ... and without a key the same setting falls back to the simulator instead of a dead route.
    assert default_route(admin, {}).provider == "simulator"


def test_a_custom_endpoint_is_offered_with_its_configured_window():
    custom = EndpointSettings(provider="custom", model="llama-3.3-70b", base_url="http://gpu:8000/v1",
                              context_length=131_072)
    routes = available_routes(custom, {})
    assert [r.provider for r in routes] == ["simulator", "custom"]
    assert routes[1].models[0].context_window == 131_072
    assert default_route(custom, {}).provider == "custom"
    assert route_label("custom", base_url="http://gpu:8000/v1") == "Custom endpoint (gpu:8000)"


def test_the_label_names_an_anthropic_base_url():
    assert route_label("anthropic", env=KEY) == "Anthropic"
    assert route_label("anthropic", env={**KEY, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/"}).startswith("Anthropic")


def test_the_catalogue_gives_the_documented_minimum_cacheable_lengths():
    expected = {"claude-opus-4-8": 1024, "claude-sonnet-4-6": 1024, "claude-sonnet-4-5": 1024,
                "claude-opus-4-7": 2048, "claude-opus-4-6": 4096, "claude-opus-4-5": 4096,
                "claude-haiku-4-5": 4096, "claude-fable-5": 512}
    assert {name: get_model(name).min_cache_tokens for name in expected} == expected
