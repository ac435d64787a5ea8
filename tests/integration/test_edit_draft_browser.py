"""What the reader typed in the *Edit last message* box survives the server re-rendering the status
line around it, in headless Chromium against the real stack.

Every socket (re)connect re-sends the transcript and the status line (the box lives in the status
line), and so does an edit or a regenerate from another tab. The box used to come back with the
text it was served with: the reader's draft silently went back to the old message, and Resend
sent that (seen as a walk through the product that opened the box before its socket's first
message had landed, then waited for a reply to the edited text that never came)."""
from __future__ import annotations

import pytest

from sessions import live as pushes
from sessions.models import Turn
from tests.browser import browser
from tests.integration.helpers import make_conversation, sim_control
from tests.integration.test_browser_conversation import login, open_socket, send
from tests.integration.test_chat_browser import LAPTOP

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]


def assistant_says(page, start: str, timeout: float = 30_000) -> None:
    page.wait_for_function(
        "start => [...document.querySelectorAll('#transcript > [data-role=assistant] .text')]"
        ".some(e => e.innerText.startsWith(start))", arg=start, timeout=timeout)


def test_a_draft_in_the_edit_box_survives_a_re_rendered_status_line_and_is_what_resend_sends(live, alice):
    sim_control(live, "/_sim/faults", {"clear": True})
    conversation = make_conversation(alice)
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        page = b.new_context(viewport=LAPTOP).new_page()
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(page)
        send(page, "the first question")
        assistant_says(page, 'You said: "the first question"')
        page.get_by_role("button", name="Regenerate").wait_for(timeout=30_000)  # the turn has ended

        page.get_by_text("Edit last message").click()
        box = page.get_by_role("textbox", name="Edited message")
        box.fill("the edited question")
        box.press("Home")
        for _ in range(4):
            box.press("ArrowRight")  # the caret after "the "

        # The whole transcript and status line again, as a reconnect or another tab's edit sends it.
        page.evaluate("window.__statusBefore = document.getElementById('turn-status')")
        pushes.transcript_changed(conversation)
        page.wait_for_function("() => { const s = document.getElementById('turn-status'); "
                               "return s && s !== window.__statusBefore; }", timeout=10_000)

        assert page.locator("#edit-last").evaluate("d => d.open"), "the box the reader opened was closed"
        assert box.input_value() == "the edited question"
        assert page.evaluate("document.activeElement && document.activeElement.id") == "edit-text"
        assert page.evaluate("[document.activeElement.selectionStart, document.activeElement.selectionEnd]") == [4, 4]

        page.get_by_role("button", name="Resend").click()
        assistant_says(page, 'You said: "the edited question"')
        assert list(Turn.objects.filter(conversation=conversation, kind="edit").values_list("text", flat=True)) == [
            "the edited question"]


def test_a_box_the_reader_did_not_type_in_takes_the_servers_new_text(live, alice):
    """Only a draft is kept: an untouched box shows the last message as the server now has it."""
    sim_control(live, "/_sim/faults", {"clear": True})
    conversation = make_conversation(alice)
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        page = b.new_context(viewport=LAPTOP).new_page()
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(page)
        send(page, "the first question")
        assistant_says(page, 'You said: "the first question"')
        page.get_by_role("button", name="Regenerate").wait_for(timeout=30_000)
        page.get_by_text("Edit last message").click()
        box = page.get_by_role("textbox", name="Edited message")
        assert box.input_value() == "the first question"

        # Another tab edits the message; this page hears of it through the socket.
        turn = Turn.objects.filter(conversation=conversation).latest("id")
        turn.user_message.content = "the question as another tab left it"
        turn.user_message.save(update_fields=["content"])
        page.evaluate("window.__statusBefore = document.getElementById('turn-status')")
        pushes.transcript_changed(conversation)
        page.wait_for_function("() => { const s = document.getElementById('turn-status'); "
                               "return s && s !== window.__statusBefore; }", timeout=10_000)
        assert box.input_value() == "the question as another tab left it"
