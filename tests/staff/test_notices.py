from __future__ import annotations

import pytest
from django.template import Context, Template
from django.test import RequestFactory

from compression import settings_store
from staff.models import UserNotice
from staff.services import codex_autoraise_notice_for
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


def test_it_works_from_a_template(alice):
    conversation = codex(alice)
    request = RequestFactory().get("/")
    request.user = alice
    template = Template("{% load staff_notices %}{% codex_autoraise_notice conversation as notice %}"
                        "{% if notice %}<p>{{ notice }}</p>{% endif %}")
    first = template.render(Context({"request": request, "conversation": conversation}))
    assert first.startswith("<p>Codex gpt-5.5") and "85%" in first
    assert template.render(Context({"request": request, "conversation": conversation})) == ""
