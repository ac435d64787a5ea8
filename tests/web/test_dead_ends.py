"""Dead ends a first-time user meets, each turned into a page that says what to do: an overflowing
turn with compression switched off names what this user can do (not the switch only staff can
reach); the preview URL opened by a GET leads back to its form; a compaction too small to be worth
it is not offered as the main action; a switch to the model already in use is refused plainly."""
from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse
from django.utils import timezone

from compression import settings_store
from sessions.models import ApiCall, CompressionEvent, Conversation, Message
from sessions.services.context import message_append, session_active, session_start
from sessions.services.recall_edit import MIN_SAVING_TOKENS, Draft
from sessions.services.routes import ModelAlreadyInUse, conversation_model_switch
from sessions.services.runtime import current_config
from sessions.services.turns import turn_submit
from simulator import parse_fault

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def exchanges(conversation, pairs: int, size: int = 400) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * size)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * size)


# 1. An overflowing turn with compression switched off.

def overflow_with_compression_off(user, conversation, sim, capture):
    settings_store.save_group("compression", {"enabled": False})
    exchanges(conversation, 20)
    sim.sim.faults.push(parse_fault("413"), 1)
    with capture(execute=True):
        turn, _ = turn_submit(user=user, conversation_id=conversation.id, text="hello")
    turn.refresh_from_db()
    assert turn.status == "failed"
    return turn


def test_an_overflow_with_compression_off_names_what_the_user_can_do(
        eager_simulator, signed_in, alice, conversation, django_capture_on_commit_callbacks):
    turn = overflow_with_compression_off(alice, conversation, eager_simulator, django_capture_on_commit_callbacks)
    error = turn.error
    assert "no longer fits" in error and "/new" in error
    # The larger models this installation offers, with their windows, smallest first.
    assert "Simulator Claude 200K (200,000 tokens), Simulator Claude 1M (1,000,000 tokens)" in error
    assert "32K" not in error  # smaller (and refused here): never offered as a way out
    # Not staff: nothing about the switch only an administrator can reach, and no /compress.
    assert "ompression" not in error and "/compress" not in error
    assert "`" not in error and ".)." not in error
    assert not CompressionEvent.objects.filter(conversation=conversation).exists()
    page = signed_in.get(reverse("conversation", args=[conversation.id])).content.decode()
    [shown] = re.findall(r'<span class="reason">(.*?)</span>', page, re.S)
    shown = html_lib.unescape(shown)
    assert "`" not in shown and "Simulator Claude 1M (1,000,000 tokens)" in shown and "/new" in shown


def test_staff_are_told_that_compression_is_switched_off(
        eager_simulator, alice, conversation, django_capture_on_commit_callbacks):
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])
    turn = overflow_with_compression_off(alice, conversation, eager_simulator, django_capture_on_commit_callbacks)
    assert "Compression is switched off by an administrator" in turn.error
    assert "/new" in turn.error and "Simulator Claude 1M (1,000,000 tokens)" in turn.error
    assert "/compress" not in turn.error and "`" not in turn.error


def test_the_hint_offers_compress_when_it_is_on_and_says_when_no_model_is_larger(conversation):
    from sessions.agent.loop import recovery_hint

    conversation.model = "sim-claude-1m"
    conversation.save(update_fields=["model"])
    hint = recovery_hint(conversation=conversation, cfg=current_config())
    assert hint.startswith("Try /compress followed by a topic") and "/new" in hint
    assert "No model offered here has a larger context window than this one (1,000,000 tokens)." in hint
    assert "Switch model" not in hint and "`" not in hint


# 2. The preview URL opened by a GET (a bookmark, back/forward, a reload).

@pytest.mark.parametrize("name", ["compress-preview", "compress-commit"])
def test_a_get_of_the_preview_leads_to_its_form_with_a_note(signed_in, conversation, name):
    exchanges(conversation, 10)
    before = Message.objects.count()
    url = reverse(name, args=[conversation.id])
    response = signed_in.get(url)
    assert response.status_code == 302
    assert response["Location"] == reverse("conversation", args=[conversation.id]) + "#compress-preview-form"
    page = signed_in.get(response["Location"]).content.decode()
    assert "Preview and edit…" in html_lib.unescape(page) and "opens from its button" in html_lib.unescape(page)
    assert 'id="compress-preview-form"' in page
    # A GET never drafts (no summariser call) and never commits.
    assert not ApiCall.objects.exists() and not CompressionEvent.objects.exists()
    assert Message.objects.count() == before


def test_a_get_of_another_users_preview_is_not_found(client, bob, conversation):
    client.force_login(bob)
    assert client.get(reverse("compress-preview", args=[conversation.id])).status_code == 404


# 3. A compaction too small to be worth it.

def test_a_draft_is_worth_it_from_five_percent_of_the_context_and_at_least_500_tokens():
    def draft(before, after):
        return Draft(engine="compressor", token="t", focus_topic="", ok=True, summarised=3,
                     tokens_before=before, tokens_after=after)

    assert not draft(14_353, 14_336).worth_it  # 17 tokens
    assert not draft(8_000, 7_600).worth_it  # 5 % of it, but under 500 tokens
    assert draft(8_000, 7_500).worth_it  # 500 tokens, over 5 %
    assert not draft(100_000, 96_000).worth_it  # 4,000 tokens, but 4 %
    assert draft(100_000, 95_000).worth_it
    assert MIN_SAVING_TOKENS == 500
    assert draft(14_353, 14_336).not_worth_reason.startswith("This compression is not worth it: it would save "
                                                             "only ~17 tokens, 0.1% of the ~14,353-token context.")
    assert draft(14_353, 14_400).not_worth_reason.startswith("This compression is not worth it: it would save nothing")
    assert draft(8_000, 7_500).not_worth_reason == ""


def small_gain_history(conversation):
    """A large first message kept verbatim, a middle barely longer than the summary that would
    replace it: the simulator's draft saves a handful of tokens of ~5,500."""
    session = session_active(conversation)
    message_append(session=session, role="user", content="Setup " + "context " * 5000)
    message_append(session=session, role="assistant", content="Hello 1.")
    message_append(session=session, role="user", content="Hello 2.")
    message_append(session=session, role="user", content="Long " + "detail " * 300)
    for i in range(5):
        message_append(session=session, role="assistant" if i % 2 == 0 else "user", content=f"T{i} " + "word " * 20)


def preview(client, conversation):
    return client.post(reverse("compress-preview", args=[conversation.id]), {"topic": ""})


def test_a_preview_that_saves_too_little_says_so_and_does_not_offer_the_commit_first(
        simulator_wired, signed_in, conversation):
    small_gain_history(conversation)
    page = preview(signed_in, conversation)
    html = html_lib.unescape(page.content.decode())
    assert page.status_code == 200
    assert 'id="compress-not-worth"' in html and "This compression is not worth it" in html
    assert re.search(r"~5,\d{3} → ~5,\d{3} tokens", html)  # thousands separators
    # The commit is folded away, as a secondary "Compress anyway"; going back is the main action.
    assert '<details id="compress-anyway">' in html
    assert re.search(r'<button type="submit" class="secondary" id="compress-commit-button">Compress anyway</button>',
                     html)
    assert "Commit this summary" not in html
    assert html.index('id="compress-not-worth-back"') < html.index('id="compress-commit-button"')
    assert not CompressionEvent.objects.exists()


def test_the_preview_says_one_message_and_prints_thousands(signed_in, conversation, monkeypatch):
    from sessions.services import recall_edit

    def one_message(*, conversation, focus_topic=None):
        return Draft(engine="compressor", token="t", focus_topic="", ok=True, prose="## Goal\nx", summarised=1,
                     tokens_before=14_353, tokens_after=14_336, tail=[{"role": "user", "name": "", "text": "hi"}])

    monkeypatch.setattr(recall_edit, "compression_draft", one_message)
    html = html_lib.unescape(preview(signed_in, conversation).content.decode())
    assert "1 message would be replaced" in html and "1 messages" not in html
    assert "(~14,353 → ~14,336 tokens" in html
    assert "only ~17 tokens, 0.1% of the ~14,353-token context" in html
    assert "After the summary (1 message)" in html


def test_a_preview_worth_it_keeps_the_commit_as_the_main_action(simulator_wired, signed_in, conversation):
    exchanges(conversation, 30, size=300)
    html = html_lib.unescape(preview(signed_in, conversation).content.decode())
    assert 'id="compress-not-worth"' not in html and "<details id=\"compress-anyway\">" not in html
    assert '<button type="submit" id="compress-commit-button">Commit this summary</button>' in html
    assert re.search(r"\d+ messages would be replaced by the summary below\s+\(~\d{1,3}(,\d{3})+ → ", html)


# 4. A switch to the model already in use.

@pytest.mark.parametrize("confirm", ["", "1"])
def test_a_switch_to_the_model_in_use_is_refused_plainly(signed_in, conversation, confirm):
    url = reverse("conversation-model-switch", args=[conversation.id])
    response = signed_in.post(url, {"model": "simulator:sim-claude-64k", "confirm": confirm}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "This conversation already uses Simulator Claude 64K" in body
    assert "prompt cache starts cold" not in body and 'name="confirm"' not in body and "→" not in body
    conversation.refresh_from_db()
    assert (conversation.provider, conversation.model) == ("simulator", "sim-claude-64k")
    assert not Message.objects.filter(name="model_switch").exists()


def test_without_htmx_the_refusal_is_a_flash_on_the_conversation(signed_in, conversation):
    url = reverse("conversation-model-switch", args=[conversation.id])
    page = signed_in.post(url, {"model": "simulator:sim-claude-64k"}, follow=True)
    assert "This conversation already uses Simulator Claude 64K" in page.content.decode()
    assert not Message.objects.filter(name="model_switch").exists()


def test_the_service_refuses_the_model_in_use_and_changes_nothing(conversation):
    session = session_active(conversation)
    session.context_length, session.last_prompt_tokens = 50_000, 30_000
    session.save()
    with pytest.raises(ModelAlreadyInUse, match="already uses Simulator Claude 64K"):
        conversation_model_switch(conversation=conversation, cfg=current_config(), provider="simulator",
                                  model="sim-claude-64k")
    session.refresh_from_db()
    assert (session.context_length, session.last_prompt_tokens) == (50_000, 30_000)
    assert not Message.objects.filter(name="model_switch").exists()


def test_no_regenerate_retry_or_edit_is_offered_for_a_message_a_compaction_summarised(signed_in, conversation):
    """The services refuse to answer a compacted message again; the status line must not offer it."""
    from sessions import fragments
    from sessions.models import Turn

    session = session_active(conversation)
    asked = message_append(session=session, role="user", content="what is the plan")
    message_append(session=session, role="assistant", content="the plan")
    turn = Turn.objects.create(conversation=conversation, status="done", user_message=asked)
    html = fragments.render_turn_status(conversation)
    assert 'id="regenerate-button"' in html and 'id="edit-last"' in html  # answerable: offered
    session.ended_at = timezone.now()  # a compaction rotated the session
    session.save(update_fields=["ended_at"])
    session_start(conversation=conversation)
    html = fragments.render_turn_status(conversation)
    assert 'id="regenerate-button"' not in html and 'id="edit-last"' not in html
    Turn.objects.filter(pk=turn.pk).update(status="failed", finished_at=timezone.now(), error="overloaded")
    assert 'id="edit-last"' not in fragments.render_turn_status(conversation)
    failed = fragments.render_transcript(conversation)
    assert "retry-button" not in failed and "send it again as a new message" in failed
    # And what it would have offered is indeed refused.
    response = signed_in.post(reverse("turn-regenerate", args=[conversation.id]), **HTMX)
    assert response.status_code == 422 and "compacted" in response.content.decode()
