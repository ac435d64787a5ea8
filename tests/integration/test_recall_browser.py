"""Recall in headless Chromium against the real stack: preview a manual compression, edit the
summary and commit it (the divider says it was edited), cancel another preview (nothing changes),
then search the conversation for a fact that was compacted away and open the original in
context, highlighted and in view."""
from __future__ import annotations

import re

import pytest

from sessions.models import CompressionEvent, Conversation
from sessions.services.context import message_append, session_start
from sessions.services.recall_edit import EDITED_MARK, EDITED_REASON
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import sim_control
from tests.integration.test_browser_conversation import login, open_socket

pytestmark = [pytest.mark.integration, pytest.mark.browser]

FACT = "The staging gateway listens on port 8443 behind the blue load balancer."


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})


def history(conversation) -> int:
    session = session_start(conversation=conversation)
    for i in range(3):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"Hello {i}.")
    fact = message_append(session=session, role="user", content=FACT)
    for i in range(30):
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 300)
    return fact.id


def test_preview_edit_commit_then_find_the_compacted_fact(live, alice):
    base = f"http://127.0.0.1:{live.web_port}"
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k",
                                               title="Recall")
    fact_id = history(conversation)
    ARTIFACTS.mkdir(exist_ok=True)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(page)

        # Preview: the draft the summariser wrote, what stays verbatim; nothing has changed yet.
        page.click("#compress-preview-button")
        page.wait_for_selector("#compress-summary", timeout=60_000)
        assert "## Goal" in page.input_value("#compress-summary")
        assert "Answer 29" in page.inner_text("#compress-kept-tail")
        assert "unedited" in page.inner_text("#compress-summary-state")
        assert not CompressionEvent.objects.filter(conversation=conversation).exists()
        page.screenshot(path=str(ARTIFACTS / "recall-preview.png"))

        # Edit and commit: the divider carries the mark, the event the reason.
        page.fill("#compress-summary", "## Goal\nKeep the gateway on port 8443 and answer briefly.")
        assert "Edited" in page.inner_text("#compress-summary-state")
        assert page.is_visible("#compress-reset-button")
        page.click("#compress-commit-button")
        page.wait_for_url(re.compile(rf".*/conversations/{conversation.id}/$"), timeout=60_000)
        assert "Compressed with the summary you reviewed" in page.inner_text(".flash")
        event = CompressionEvent.objects.get(conversation=conversation)
        assert (event.status, event.reason) == ("compressed", EDITED_REASON)
        divider = page.locator("[data-role=summary]").last
        divider.locator("summary").click()
        assert EDITED_MARK in divider.inner_text() and "answer briefly" in divider.inner_text()

        # A socket (re)connect after something changed re-sends the whole transcript (one still in
        # step with the page gets "synced"): the summary the reader opened stays open.
        open_socket(page)
        Conversation.objects.filter(id=conversation.id).update(title="Recall, renamed")
        page.evaluate("() => { document.getElementById('transcript').dataset.before = '1'; "
                      "document.querySelector('[ws-connect]')['htmx-internal-data'].webSocket.init(); }")
        page.wait_for_function("() => !document.getElementById('transcript').dataset.before", timeout=30_000)
        assert divider.locator("details").get_attribute("open") is not None
        assert "answer briefly" in divider.inner_text()

        # Another preview, cancelled: nothing changes. Right after a compaction it saves too little to
        # be worth it, so the page leads back to the conversation first (the commit is folded away).
        page.click("#compress-preview-button")
        leave = page.locator("#compress-not-worth-back, #compress-cancel:visible").first
        leave.wait_for(timeout=60_000)
        leave.click()
        page.wait_for_url(re.compile(rf".*/conversations/{conversation.id}/$"))
        assert CompressionEvent.objects.filter(conversation=conversation).count() == 1

        # The fact is compacted away; the search finds it and opens it in context.
        open_socket(page)
        page.fill("#recall-q", "which port does the staging gateway use")
        page.press("#recall-q", "Enter")
        row = page.wait_for_selector(f"#recall-hits li[data-ref=m{fact_id}]", timeout=15_000)
        assert "compacted" in row.inner_text() and row.query_selector("mark") is not None
        row.query_selector("a").click()
        page.wait_for_url(re.compile(rf".*/messages/{fact_id}/.*"))
        hit = page.locator(".recall-hit")
        assert hit.get_attribute("id") == f"msg-{fact_id}"
        assert "8443" in hit.inner_text() and hit.locator("mark").count() >= 2
        page.wait_for_function("() => document.activeElement && document.activeElement.classList.contains('recall-hit')")
        in_view = page.evaluate("() => { const r = document.querySelector('.recall-hit').getBoundingClientRect(); "
                                "return r.top >= 0 && r.bottom <= window.innerHeight; }")
        assert in_view
        page.screenshot(path=str(ARTIFACTS / "recall-in-context.png"))
        assert errors == []
