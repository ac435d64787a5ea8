"""A read-only share link in headless Chromium against the real stack: the owner opens "Export and
share" on the conversation page, creates a link and copies it; a fresh browser without a login
opens it and reads the transcript with its compaction divider, and nothing to write with; the
console stays clean (no error, no content-security-policy violation) on both pages; the owner
revokes the link and the visitor's reload gets the 404."""
from __future__ import annotations

import pytest
from django.utils import timezone

from sessions.models import Conversation, Session
from sessions.services.context import message_append, session_start
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.test_browser_conversation import login, open_socket
from tests.integration.test_console_clean_browser import Console

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

LAPTOP = {"width": 1280, "height": 900}


def compacted(owner) -> Conversation:
    """A conversation with an exchange, a compaction divider and an exchange after it."""
    c = Conversation.objects.create(owner=owner, title="Gateway migration", provider="simulator", model="sim-claude-64k")
    first = session_start(conversation=c)
    message_append(session=first, role="user", content="How do we move the gateway?")
    message_append(session=first, role="assistant", content="Move it **behind** the blue load balancer.")
    child = Session.objects.create(conversation=c, parent=first)
    Session.objects.filter(id=first.id).update(ended_at=timezone.now(), end_reason="compression")
    summary = message_append(session=child, role="user", content="## Goal\nMove the gateway behind the balancer.",
                             is_summary=True)
    c.compression_events.create(session=first, new_session=child, summary_message=summary, trigger="manual",
                                status="compressed", messages_before=8, messages_after=3, in_place=False)
    message_append(session=child, role="user", content="And the port?")
    message_append(session=child, role="assistant", content="It stays on 8443.")
    return c


def test_the_owner_shares_a_read_only_link_and_revokes_it(live, alice):
    base = f"http://127.0.0.1:{live.web_port}"
    conversation = compacted(alice)
    ARTIFACTS.mkdir(exist_ok=True)
    with browser() as b:
        owner_context = b.new_context(viewport=LAPTOP, permissions=["clipboard-read", "clipboard-write"])
        owner = owner_context.new_page()
        owner_console = Console(owner)
        login(owner, base, "alice", "alice-password-1")
        owner.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(owner)

        # Opening "Export and share" loads the list of links; create one and copy it.
        owner_console.at("open the panel")
        owner.click("#export-share > summary")
        owner.wait_for_selector("#share-links[data-loaded] #share-none")
        owner_console.at("create a link")
        owner.select_option("#share-expires", "never")
        owner.click("#share-create-button")
        field = owner.wait_for_selector("#share-new-url")
        url = field.input_value()
        assert url.startswith(f"{base}/share/") and len(url) == len(f"{base}/share/") + 43 + 1
        assert "Copy the link now" in owner.inner_text("#share-created")
        assert owner.locator("#share-list .share-link").count() == 1
        owner.click("#share-copy")
        owner.wait_for_function("() => document.getElementById('share-copy').textContent === 'Copied'")
        assert owner.evaluate("() => navigator.clipboard.readText()") == url
        owner.screenshot(path=str(ARTIFACTS / "share-panel.png"))

        # A visitor without an account: the transcript, the divider, nothing to act with.
        visitor_context = b.new_context(viewport=LAPTOP)
        visitor = visitor_context.new_page()
        visitor_console = Console(visitor)
        visitor_console.at("open the shared link")
        response = visitor.goto(url)
        assert response.status == 200
        assert response.headers["x-robots-tag"] == "noindex, nofollow"
        assert visitor.locator("h1").inner_text() == "Gateway migration"
        divider = visitor.locator("[data-role=summary]")
        assert divider.count() == 1 and "Context compacted" in divider.inner_text()
        divider.locator("summary").click()
        assert "Move the gateway behind the balancer." in divider.inner_text()
        assert visitor.locator("[data-role=assistant] .markdown strong").inner_text() == "behind"
        assert "It stays on 8443." in visitor.inner_text("#transcript")
        for absent in ("#composer", "textarea", "form", "[ws-connect]", "#sidebar", "#share-workspace"):
            assert visitor.locator(absent).count() == 0, absent
        assert visitor.context.cookies() == []
        visitor.screenshot(path=str(ARTIFACTS / "share-page.png"), full_page=True)

        # The owner revokes it: the list empties, and the link is gone for the visitor.
        owner_console.at("revoke")
        owner.click("#share-list .share-revoke-button")
        owner.wait_for_selector("#share-links #share-none")
        assert owner_console.problems == [], "\n".join(owner_console.problems)
        assert visitor_console.problems == [], "\n".join(visitor_console.problems)
        response = visitor.reload()
        assert response.status == 404
        assert "Gateway migration" not in visitor.content()
