"""A conversation page's socket is told it is in step instead of being sent the panels the page
was just served with; a reconnect after a change it missed still re-renders them, in headless
Chromium against the real stack. Each kind of change alone: a message, a compression event and a
setting that moves the gauge, each written while the socket is closed."""
from __future__ import annotations

import pytest

from compression import settings_store
from sessions import fragments, presenters
from sessions.models import CompressionEvent
from sessions.services.context import message_append, session_active
from tests.browser import browser
from tests.integration.helpers import make_conversation
from tests.integration.test_browser_conversation import login, open_socket
from tests.integration.test_chat_browser import LAPTOP

pytestmark = [pytest.mark.integration, pytest.mark.browser]

# Every message the socket delivers, and the panels as the page was served (before any message).
WATCH = """
window.__live = [];
document.addEventListener('htmx:wsAfterMessage', e => window.__live.push(e.detail.message));
document.addEventListener('DOMContentLoaded', () => {
  window.__served = ['gauge', 'cache-panel', 'event-feed', 'transcript', 'turn-status']
    .map(id => document.getElementById(id));
});
"""
SOCKET = "document.querySelector('[ws-connect]')['htmx-internal-data'].webSocket"
PANELS_AS_SERVED = ("() => ['gauge', 'cache-panel', 'event-feed', 'transcript', 'turn-status']"
                    ".every((id, i) => document.getElementById(id) === window.__served[i])")


def drop(page) -> None:
    """Close the socket as a network drop would, without htmx's automatic reconnect."""
    page.evaluate(f"{SOCKET}.socket.close()")
    page.wait_for_function("() => !document.querySelector('[ws-connect]').dataset.live", timeout=10_000)


def reconnect(page) -> None:
    """Open it again, to the same URL (what the page was served with), and wait for its first message."""
    page.evaluate(f"{SOCKET}.init()")
    open_socket(page)


def _message(conversation) -> str:
    message_append(session=session_active(conversation), role="user", content="written while the socket was down")
    return ("() => [...document.querySelectorAll('#transcript [data-role=user] .text')]"
            ".some(e => e.textContent.includes('written while the socket was down'))")


def _compression_event(conversation) -> str:
    event = CompressionEvent.objects.create(conversation=conversation, session=session_active(conversation),
                                            trigger="manual", status="compressed", messages_before=4, messages_after=2)
    return f"() => document.querySelector('#event-feed #event-{event.id}[data-status=compressed]') !== null"


def _setting(conversation) -> str:
    before = presenters.gauge(conversation)["threshold"]
    settings_store.save_group("compression", {"threshold": 0.3})
    after = presenters.gauge(conversation)["threshold"]
    assert after != before
    return f"() => document.getElementById('gauge').dataset.threshold === '{after}'"


def test_a_page_just_served_is_not_re_rendered_and_a_reconnect_after_each_missed_change_shows_it(live, alice):
    conversation = make_conversation(alice, model="sim-claude-200k")
    message_append(session=session_active(conversation), role="user", content="the first question")
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        context = b.new_context(viewport=LAPTOP)
        context.add_init_script(WATCH)
        page = context.new_page()
        login(page, base, "alice", "alice-password-1")

        for change in (_message, _compression_event, _setting):
            page.goto(f"{base}/conversations/{conversation.id}/")
            open_socket(page)
            assert page.evaluate("window.__live") == [fragments.LIVE_SYNCED]
            assert page.evaluate(PANELS_AS_SERVED), "the panels the page was served with were re-rendered"

            # Dropped and back with nothing changed meanwhile: still in step, nothing re-rendered.
            drop(page)
            reconnect(page)
            assert page.evaluate("window.__live") == [fragments.LIVE_SYNCED] * 2
            assert page.evaluate(PANELS_AS_SERVED)

            # Dropped, a change it misses, back: the whole state, with the change.
            drop(page)
            shows_it = change(conversation)
            assert not page.evaluate(shows_it)
            reconnect(page)
            page.wait_for_function(shows_it, timeout=10_000)
            assert 'id="gauge"' in page.evaluate("window.__live")[-1]
            assert not page.evaluate(PANELS_AS_SERVED)
