"""The model picker and *Switch model* offer only what this installation runs: a model whose window
is under the 64,000-token minimum is shown disabled with the reason, and a request that names it
anyway is refused with nothing saved."""
from __future__ import annotations

import re
from dataclasses import replace

import pytest
from django.urls import reverse

from compression import settings_store
from sessions.models import Conversation, Message
from sessions.services.routes import route_default
from sessions.services.runtime import current_config

HTMX = {"HTTP_HX_REQUEST": "true"}
OPTION = re.compile(r'<option value="([^"]+)"([^>]*)>([^<]*)</option>')
REFUSAL_32K = "Simulator Claude 32K — window 32,000 tokens, below the 64,000 minimum"


def options(page: str) -> dict[str, tuple[bool, bool, str]]:
    """value -> (disabled, selected, text) of every option of the page's first model picker."""
    select = page[page.index('<select name="model"'):]
    select = select[:select.index("</select>")]
    return {value: ("disabled" in attrs, "selected" in attrs, text.strip())
            for value, attrs, text in OPTION.findall(select)}


@pytest.fixture
def conversation(client, alice):
    client.force_login(alice)
    client.post(reverse("conversation-create"), {"model": "simulator:sim-claude-200k"})
    return Conversation.objects.get(owner=alice)


@pytest.mark.django_db
def test_the_picker_shows_the_32k_simulator_model_disabled_with_its_reason(client, alice):
    client.force_login(alice)
    offered = options(client.get(reverse("home")).content.decode())
    assert offered["simulator:sim-claude-32k"] == (True, False, REFUSAL_32K)
    assert offered["simulator:sim-claude-64k"] == (False, False, "Simulator Claude 64K · 64,000 tokens")
    assert offered["simulator:sim-claude-200k"] == (False, True, "Simulator Claude 200K · 200,000 tokens")
    assert offered["simulator:sim-claude-1m"] == (False, False, "Simulator Claude 1M · 1,000,000 tokens")


@pytest.mark.django_db
def test_switch_model_shows_the_32k_simulator_model_disabled_with_its_reason(client, conversation):
    offered = options(client.get(reverse("conversation", args=[conversation.id])).content.decode())
    assert offered["simulator:sim-claude-32k"] == (True, False, REFUSAL_32K)
    assert [v for v, (disabled, _, _) in offered.items() if not disabled] == [
        "simulator:sim-claude-64k", "simulator:sim-claude-200k", "simulator:sim-claude-1m"]
    assert offered["simulator:sim-claude-200k"][1]  # the conversation's own model is selected


@pytest.mark.django_db
def test_every_real_model_stays_offered_with_a_key(client, alice, settings):
    settings.ANTHROPIC_API_KEY = "sk-ant-test-key"
    client.force_login(alice)
    offered = options(client.get(reverse("home")).content.decode())
    assert offered and all(v.startswith("anthropic:") and not disabled for v, (disabled, _, _) in offered.items())


@pytest.mark.django_db
@pytest.mark.parametrize("htmx", [True, False], ids=["htmx", "plain-form"])
def test_creating_a_conversation_on_a_model_that_cannot_run_is_refused_and_creates_nothing(client, alice, htmx):
    client.force_login(alice)
    response = client.post(reverse("conversation-create"), {"model": "simulator:sim-claude-32k"},
                           **(HTMX if htmx else {}), follow=not htmx)
    body = response.content.decode()
    assert response.status_code == (422 if htmx else 200)
    assert "Simulator Claude 32K (sim-claude-32k) cannot be used here" in body
    assert "32,000 tokens is below the minimum of 64,000 tokens" in body
    assert not Conversation.objects.exists()


@pytest.mark.django_db
def test_new_conversation_does_not_move_an_empty_one_to_a_model_that_cannot_run(client, conversation):
    response = client.post(reverse("conversation-create"), {"model": "simulator:sim-claude-32k"}, **HTMX)
    assert response.status_code == 422
    conversation.refresh_from_db()
    assert Conversation.objects.count() == 1 and conversation.model == "sim-claude-200k"


@pytest.mark.django_db
@pytest.mark.parametrize("confirm", ["", "1"], ids=["asking", "confirmed"])
def test_a_switch_to_a_model_that_cannot_run_is_refused_and_changes_nothing(client, conversation, confirm):
    url = reverse("conversation-model-switch", args=[conversation.id])
    response = client.post(url, {"model": "simulator:sim-claude-32k", "confirm": confirm}, **HTMX)
    assert response.status_code == 422
    body = response.content.decode()
    assert "cannot be used here" in body and "prompt cache starts cold" not in body
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-200k"
    assert not Message.objects.filter(name="model_switch").exists()


@pytest.mark.django_db
def test_a_conversation_left_on_a_model_that_cannot_run_does_not_preselect_it(client, alice):
    old = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-32k", max_tokens=4096)
    client.force_login(alice)
    offered = options(client.get(reverse("conversation", args=[old.id])).content.decode())
    assert offered["simulator:sim-claude-32k"] == (True, False, REFUSAL_32K)


def custom_configured_window(monkeypatch):
    """A custom endpoint whose configured window is under the minimum (the validator refuses such a
    value today; the picker must still not offer it)."""
    settings_store.save_group("model", {"provider": "custom", "model": "llama-3.3-70b",
                                        "base_url": "http://gpu:8000/v1", "context_length": 131_072})
    cfg = settings_store.current()
    small = replace(cfg, model=replace(cfg.model, context_length=32_768))
    monkeypatch.setattr(settings_store, "current", lambda: small)
    return "custom:llama-3.3-70b", "llama-3.3-70b — window 32,768 tokens, below the 64,000 minimum"


def custom_catalogue_window(monkeypatch):
    """A custom endpoint serving a model the catalogue gives a window under the minimum."""
    settings_store.save_group("model", {"provider": "custom", "model": "sim-claude-32k",
                                        "base_url": "http://gpu:8000/v1"})
    return "custom:sim-claude-32k", "sim-claude-32k — window 32,000 tokens, below the 64,000 minimum"


@pytest.mark.django_db
@pytest.mark.parametrize("configure", [custom_configured_window, custom_catalogue_window],
                         ids=["configured-window", "catalogue-window"])
def test_a_custom_endpoint_model_with_a_window_under_the_minimum_is_disabled(client, alice, monkeypatch,
                                                                              configure):
    value, text = configure(monkeypatch)
    client.force_login(alice)
    offered = options(client.get(reverse("home")).content.decode())
    assert offered[value] == (True, False, text)
    # The admin's default cannot run, so new conversations get the installation's own default.
    assert offered["simulator:sim-claude-200k"] == (False, True, "Simulator Claude 200K · 200,000 tokens")
    assert (route_default(current_config()).provider, route_default(current_config()).model) == (
        "simulator", "sim-claude-200k")
    response = client.post(reverse("conversation-create"), {"model": value}, **HTMX)
    assert response.status_code == 422 and "cannot be used here" in response.content.decode()
    assert not Conversation.objects.exists()
    client.post(reverse("conversation-create"))
    assert Conversation.objects.get(owner=alice).model == "sim-claude-200k"


@pytest.mark.django_db
def test_a_custom_endpoint_model_with_a_large_enough_window_stays_offered(client, alice):
    settings_store.save_group("model", {"provider": "custom", "model": "llama-3.3-70b",
                                        "base_url": "http://gpu:8000/v1", "context_length": 131_072})
    client.force_login(alice)
    offered = options(client.get(reverse("home")).content.decode())
    assert offered["custom:llama-3.3-70b"] == (False, True, "llama-3.3-70b · 131,072 tokens")
