"""The recall pages through the test client: the user's search (archived parts included) and an
original opened in context, owner-checked; preview-and-edit before a manual compression, with the
summariser on the in-process simulator: the draft changes nothing, an edit is committed and
marked, a stale or forged preview, an empty text or a busy conversation is refused with the text
kept."""
from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse

from compression import settings_store
from sessions.models import CompressionEvent, Conversation, Message
from sessions.services.context import context_messages, message_append, session_active, session_start
from sessions.services.locks import COMPRESSION_LOCK, lock_acquire
from sessions.services.recall_edit import EDITED_MARK, EDITED_REASON, PREVIEWED_REASON

from .test_recall_index import index_after_migrate  # noqa: F401  (module fixture: the index objects exist)

pytestmark = pytest.mark.django_db

FACT = "The staging gateway listens on port 8443 behind the blue load balancer."


@pytest.fixture(autouse=True)
def _wiring(simulator_wired):
    """Every test here talks to the shared simulator (tests/web/conftest.py)."""


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def long_history(conversation, pairs=30):
    session = session_active(conversation)
    for i in range(3):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"Hello {i}.")
    fact = message_append(session=session, role="user", content=FACT)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 300)
    return fact


def test_the_search_finds_an_archived_original_and_links_it_in_context(signed_in, conversation):
    fact = long_history(conversation, pairs=2)
    Message.objects.filter(id=fact.id).update(archived=True)
    url = reverse("recall-search", args=[conversation.id])
    page = signed_in.get(url, {"q": "which port does the staging gateway use"}, HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200 and "<html" not in html  # a fragment for htmx
    assert f'data-ref="m{fact.id}"' in html and "compacted" in html and "<mark>" in html
    link = reverse("recall-message", args=[conversation.id, fact.id])
    assert f"{link}?q=which%20port%20does%20the%20staging%20gateway%20use#msg-{fact.id}" in html
    full = signed_in.get(url, {"q": "gateway"})
    assert "<html" in full.content.decode() and f'data-ref="m{fact.id}"' in full.content.decode()


def test_an_empty_or_unmatched_search_says_so(signed_in, conversation):
    url = reverse("recall-search", args=[conversation.id])
    empty = signed_in.get(url, {"q": "  "}, HTTP_HX_REQUEST="true")
    assert empty.status_code == 422 and "Type the words" in empty.content.decode()
    none = signed_in.get(url, {"q": "zeppelin"}, HTTP_HX_REQUEST="true")
    assert none.status_code == 200 and "Nothing in this conversation matches" in none.content.decode()


def test_an_original_opens_in_context_with_the_match_highlighted(signed_in, conversation):
    fact = long_history(conversation, pairs=4)
    page = signed_in.get(reverse("recall-message", args=[conversation.id, fact.id]), {"q": "staging port"})
    html = page.content.decode()
    assert page.status_code == 200
    assert f'id="msg-{fact.id}"' in html and "recall-hit" in html and 'aria-current="true"' in html
    assert "<mark>staging</mark>" in html and "<mark>port</mark>" in html
    assert html.count('class="entry ') == 1 + 3 + 6  # the hit, 3 before it (all there are), 6 after
    assert "js/recall.js" in html and "<script>" not in html


def test_another_users_conversation_or_a_copy_is_not_found(client, bob, conversation):
    fact = long_history(conversation, pairs=1)
    copy = message_append(session=session_active(conversation), role="user", content=FACT, visible=False)
    client.force_login(bob)
    assert client.get(reverse("recall-search", args=[conversation.id]), {"q": "port"}).status_code == 404
    assert client.get(reverse("recall-message", args=[conversation.id, fact.id])).status_code == 404
    client.force_login(conversation.owner)
    assert client.get(reverse("recall-message", args=[conversation.id, copy.id])).status_code == 404


def test_the_conversation_page_offers_the_search_and_the_preview(signed_in, conversation):
    html = signed_in.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert 'id="recall-search"' in html and 'id="compress-preview-form"' in html


def preview(client, conversation, topic=""):
    return client.post(reverse("compress-preview", args=[conversation.id]), {"topic": topic})


def form_value(html: str, name: str) -> str:
    return re.search(rf'name="{name}" value="([^"]*)"', html).group(1)


def test_the_preview_shows_the_draft_and_what_stays_and_changes_nothing(signed_in, conversation):
    long_history(conversation)
    before = Message.objects.count()
    page = preview(signed_in, conversation)
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="compress-summary"' in html and "## Goal" in html  # the simulator's draft
    assert 'id="compress-kept-tail"' in html and "Answer 29" in html
    assert not CompressionEvent.objects.exists() and Message.objects.count() == before


@pytest.mark.parametrize("engine", ["compressor", "lcm"])
def test_an_edited_summary_is_committed_and_marked(signed_in, conversation, engine):
    settings_store.save_group("context", {"engine": engine})
    long_history(conversation)
    html = preview(signed_in, conversation).content.decode()
    if engine == "lcm":
        assert 'id="compress-anchor-index"' in html and "port 8443" in html
    answer = signed_in.post(reverse("compress-commit", args=[conversation.id]), {
        "summary": "## Goal\nKeep the gateway on port 8443.", "token": form_value(html, "token"), "topic": ""})
    assert answer.status_code == 302
    event = CompressionEvent.objects.get(conversation=conversation)
    assert (event.status, event.trigger, event.reason) == ("compressed", "manual", EDITED_REASON)
    [summary] = [m for m in context_messages(session_active(conversation)) if m.get("_compressed_summary")]
    assert EDITED_MARK in summary["content"] and "Keep the gateway on port 8443." in summary["content"]
    assert EDITED_MARK in event.summary
    page = signed_in.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert EDITED_MARK in page  # the divider shows it


def test_the_draft_committed_unchanged_is_recorded_as_previewed(signed_in, conversation):
    long_history(conversation)
    html = preview(signed_in, conversation).content.decode()
    text = html_lib.unescape(re.search(r'<textarea id="compress-summary"[^>]*>(.*?)</textarea>', html, re.S).group(1))
    signed_in.post(reverse("compress-commit", args=[conversation.id]),
                   {"summary": text, "token": form_value(html, "token")})
    event = CompressionEvent.objects.get(conversation=conversation)
    assert event.status == "compressed" and event.reason == PREVIEWED_REASON and EDITED_MARK not in event.summary


def refused(client, conversation, token, summary="## Goal\nmine, keep me"):
    page = client.post(reverse("compress-commit", args=[conversation.id]), {"summary": summary, "token": token})
    return page.status_code, page.content.decode()


def test_a_stale_forged_or_empty_commit_is_refused_and_keeps_the_text(signed_in, conversation):
    long_history(conversation)
    token = form_value(preview(signed_in, conversation).content.decode(), "token")
    before = Message.objects.count()
    status, html = refused(signed_in, conversation, token, summary="   ")
    assert status == 409 and "The summary is empty" in html
    status, html = refused(signed_in, conversation, token[:-3] + "abc")
    assert status == 409 and "not valid" in html and "mine, keep me" in html
    message_append(session=session_active(conversation), role="user", content="one more thing")
    status, html = refused(signed_in, conversation, token)
    assert status == 409 and "changed since this preview" in html and "mine, keep me" in html
    assert 'id="compress-preview-again"' in html
    assert not CompressionEvent.objects.exists() and Message.objects.count() == before + 1


def test_a_commit_while_another_compression_runs_is_refused(signed_in, conversation):
    long_history(conversation)
    token = form_value(preview(signed_in, conversation).content.decode(), "token")
    assert lock_acquire(conversation_id=conversation.id, kind=COMPRESSION_LOCK, ttl=60)
    status, html = refused(signed_in, conversation, token)
    assert status == 409 and "already running" in html and "mine, keep me" in html
    assert not CompressionEvent.objects.exists()


def test_a_commit_that_fails_while_persisting_changes_nothing_and_says_so(signed_in, conversation, monkeypatch):
    from sessions.services import compaction
    from sessions.services.locks import TURN_LOCK

    long_history(conversation)
    session = session_active(conversation)
    before = context_messages(session)
    token = form_value(preview(signed_in, conversation).content.decode(), "token")

    def disk_full(**kwargs):
        raise OSError("No space left on device")

    monkeypatch.setattr(compaction, "_persist", disk_full)  # the fault: the write itself fails
    answer = signed_in.post(reverse("compress-commit", args=[conversation.id]),
                            {"summary": "## Goal\nKeep the gateway on port 8443.", "token": token}, follow=True)
    assert answer.status_code == 200
    event = CompressionEvent.objects.get(conversation=conversation)
    assert event.status == "failed" and event.reason.startswith(EDITED_REASON)
    assert "No space left on device" in event.reason and "Nothing was compressed" in answer.content.decode()
    assert context_messages(session_active(conversation)) == before and session_active(conversation).id == session.id
    # Both leases were given back: the next compression may run.
    for kind in (COMPRESSION_LOCK, TURN_LOCK):
        assert lock_acquire(conversation_id=conversation.id, kind=kind, ttl=60)
