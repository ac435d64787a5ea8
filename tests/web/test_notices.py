from __future__ import annotations

import pytest
from django.urls import reverse

from compression import settings_store
from sessions.models import UserNotice
from sessions.services.notices import codex_autoraise_notice_for
from tests.staff import builders as b

pytestmark = pytest.mark.django_db


def codex(owner, model="gpt-5.5"):
    return b.conversation(owner, provider="openai-codex", model=model)


def test_it_returns_the_notice_once_per_user(alice, bob):
    first = codex_autoraise_notice_for(alice, codex(alice))
    assert first is not None
    assert "85%" in first and "from 50%" in first
    assert "compression.codex_gpt55_autoraise" in first  # how to opt out
    assert codex_autoraise_notice_for(alice, codex(alice)) is None  # another conversation, same account
    assert codex_autoraise_notice_for(alice, codex(alice, "gpt-5.4-mini")) is None
    assert codex_autoraise_notice_for(bob, codex(bob)) is not None  # bob has his own "once"
    assert UserNotice.objects.filter(key="codex_autoraise").count() == 2


def test_it_returns_nothing_for_other_models(alice):
    for provider, model in [("simulator", "sim-claude-200k"), ("openai-codex", "gpt-5.3"), ("openrouter", "gpt-5.5")]:
        assert codex_autoraise_notice_for(alice, b.conversation(alice, provider=provider, model=model)) is None
    assert not UserNotice.objects.exists()
    assert codex_autoraise_notice_for(alice, codex(alice)) is not None  # not used up by the others


@pytest.mark.parametrize("switch", ["codex_gpt55_autoraise", "codex_gpt55_autoraise_notice"])
def test_it_returns_nothing_when_opted_out(alice, switch):
    settings_store.save_group("compression", {switch: False})
    assert codex_autoraise_notice_for(alice, codex(alice)) is None
    assert not UserNotice.objects.exists()
    settings_store.save_group("compression", {switch: True})
    assert codex_autoraise_notice_for(alice, codex(alice)) is not None


def test_it_returns_nothing_when_the_threshold_is_already_above_85_percent(alice):
    settings_store.save_group("compression", {"threshold": 0.9})
    assert codex_autoraise_notice_for(alice, codex(alice)) is None


def test_it_returns_nothing_to_an_anonymous_user(alice):
    from django.contrib.auth.models import AnonymousUser

    assert codex_autoraise_notice_for(AnonymousUser(), codex(alice)) is None


def test_the_conversation_page_shows_it_once(client, alice):
    conversation = codex(alice)
    client.force_login(alice)
    url = reverse("conversation", args=[conversation.id])
    first = client.get(url).content.decode()
    assert 'id="codex-autoraise-notice">Codex gpt-5.5' in first and "85%" in first
    assert "codex-autoraise-notice" not in client.get(url).content.decode()
