"""A conversation's route seen through the pages: the default with and without an Anthropic key,
the model picker, the explicit switch with its cold-cache warning, the route named on the page."""
from __future__ import annotations

import pytest
from django.urls import reverse

from compression import settings_store
from sessions.models import Conversation, Message
from sessions.presenters import gauge
from sessions.selectors import transcript
from sessions.services.context import context_messages, session_active

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def with_key(settings):
    settings.ANTHROPIC_API_KEY = "sk-ant-test-key"


@pytest.mark.django_db
def test_without_a_key_a_new_conversation_is_on_the_simulator(client, alice):
    client.force_login(alice)
    client.post(reverse("conversation-create"))
    c = Conversation.objects.get(owner=alice)
    assert (c.provider, c.model) == ("simulator", "sim-claude-200k")
    page = client.get(reverse("conversation", args=[c.id])).content.decode()
    assert "Simulator Claude 200K · offline simulator" in page


@pytest.mark.django_db
def test_with_a_key_a_new_conversation_is_on_anthropic_with_a_real_model(client, alice, with_key):
    client.force_login(alice)
    client.post(reverse("conversation-create"))
    c = Conversation.objects.get(owner=alice)
    assert (c.provider, c.model) == ("anthropic", "claude-sonnet-4-6")
    page = client.get(reverse("conversation", args=[c.id])).content.decode()
    assert 'id="route">Claude Sonnet 4.6 · Anthropic<' in page
    assert "sk-ant-test-key" not in page


@pytest.mark.django_db
def test_the_admins_default_model_is_used_when_its_route_is_available(client, alice, with_key):
    settings_store.save_group("model", {"provider": "anthropic", "model": "claude-haiku-4-5"})
    client.force_login(alice)
    client.post(reverse("conversation-create"))
    assert Conversation.objects.get(owner=alice).model == "claude-haiku-4-5"


@pytest.mark.django_db
def test_the_picker_offers_the_available_models_and_creates_on_the_chosen_one(client, alice, with_key):
    client.force_login(alice)
    home = client.get(reverse("home")).content.decode()
    assert 'value="anthropic:claude-opus-4-8"' in home and "sim-claude" not in home
    client.post(reverse("conversation-create"), {"model": "anthropic:claude-opus-4-8"})
    assert Conversation.objects.get(owner=alice).model == "claude-opus-4-8"


@pytest.mark.django_db
def test_a_model_no_route_offers_is_refused_and_nothing_is_created(client, alice):
    client.force_login(alice)
    response = client.post(reverse("conversation-create"), {"model": "anthropic:claude-opus-4-8"}, **HTMX)
    assert response.status_code == 422
    assert "not available here" in response.content.decode()
    assert not Conversation.objects.exists()


@pytest.fixture
def conversation(client, alice):
    client.force_login(alice)
    client.post(reverse("conversation-create"), {"model": "simulator:sim-claude-200k"})
    return Conversation.objects.get(owner=alice)


@pytest.mark.django_db
def test_a_switch_first_warns_of_the_cold_cache_and_the_new_threshold(client, conversation):
    url = reverse("conversation-model-switch", args=[conversation.id])
    body = client.post(url, {"model": "simulator:sim-claude-1m"}, **HTMX).content.decode()
    assert "prompt cache starts cold" in body
    # 1,000,000-token window, threshold 50 % of (window - max_tokens).
    assert f'data-role="new-window">{1_000_000:,}<' in body
    assert f'data-role="new-threshold">{(1_000_000 - 4096) // 2:,}<' in body
    assert 'name="confirm" value="1"' in body
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-200k"  # nothing changed yet


@pytest.mark.django_db
def test_a_confirmed_switch_is_a_transcript_line_and_the_next_request_uses_the_new_window(client, conversation):
    session = session_active(conversation)
    session.context_length, session.last_prompt_tokens = 150_000, 90_000  # what the old model taught
    session.save()
    url = reverse("conversation-model-switch", args=[conversation.id])
    response = client.post(url, {"model": "simulator:sim-claude-1m", "confirm": "1"}, **HTMX)
    assert response.status_code == 200 and response.headers["HX-Redirect"].endswith(f"/conversations/{conversation.id}/")
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-1m"
    line = Message.objects.get(conversation=conversation, name="model_switch")
    assert "sim-claude-200k" in line.content and "sim-claude-1m" in line.content and "cold" in line.content
    assert any(e["id"] == line.id for e in transcript(conversation))
    assert all("Model switched" not in str(m["content"]) for m in context_messages(session_active(conversation)))
    g = gauge(conversation)
    assert (g["window"], g["basis"]) == (1_000_000, "counted")
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert "Simulator Claude 1M" in page and "Model switched from" in page


@pytest.mark.django_db
def test_a_switch_to_an_unavailable_model_is_refused(client, conversation):
    url = reverse("conversation-model-switch", args=[conversation.id])
    response = client.post(url, {"model": "anthropic:claude-opus-4-8", "confirm": "1"}, **HTMX)
    assert response.status_code == 422
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-200k"
    assert not Message.objects.filter(name="model_switch").exists()


@pytest.mark.django_db
def test_another_users_conversation_cannot_be_switched(client, conversation, bob):
    client.force_login(bob)
    url = reverse("conversation-model-switch", args=[conversation.id])
    assert client.post(url, {"model": "simulator:sim-claude-1m", "confirm": "1"}).status_code == 404
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-200k"


@pytest.mark.django_db
def test_the_conversation_page_shows_the_feasibility_warning(client, conversation):
    settings_store.save_group("auxiliary", {"provider": "custom", "base_url": ""})
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert "No usable auxiliary model" in page
