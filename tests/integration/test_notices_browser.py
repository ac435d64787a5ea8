"""Notices and questions in headless Chromium against the real stack (static/js/notices.js): at
most one notice of a kind, whichever way it lands (an htmx answer, a script's insertion);
dismissable, with the focus kept; "Compression queued…" and the preview gone once the compression
ran on the worker; a timed one gone by itself; and the model switch's question in a modal
<dialog>: the focus on Cancel and kept inside, its warnings one under another, Esc closing it
without stopping the running turn, Cancel too, and confirming switching the model. Any console
error (a refused inline style or script included) fails the test."""
from __future__ import annotations

import pytest

from compression import settings_store
from sessions.models import Conversation, Turn
from sessions.services.context import message_append, session_active
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import make_conversation, sim_control, wait_for, wait_turn
from tests.integration.test_browser_conversation import login, open_socket, send

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

LAPTOP = {"width": 1440, "height": 900}
PREVIEWS = "#notices .notice[data-kind=compaction-preview]"


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    sim_control(live, "/_sim/faults", {"clear": True})


class Page:
    """A logged-in page on `conversation`, its socket open, its console errors collected."""

    def __init__(self, b, live, user, conversation: Conversation):
        self.conversation = conversation
        self.context = b.new_context(viewport=LAPTOP)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", self._console)
        base = f"http://127.0.0.1:{live.web_port}"
        login(self.page, base, user.get_username(), "alice-password-1")
        self.page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(self.page)

    def _console(self, message) -> None:
        # htmx logs an out-of-band delete whose element is already gone (the queued entry, a
        # stream's placeholder: the socket removes them idempotently) as an error; it is not one.
        if message.type == "error" and not message.text.startswith("htmx:oobErrorNoTarget"):
            self.errors.append(message.text)

    def count(self, selector: str) -> int:
        return self.page.locator(selector).count()

    def active(self, script: str = "el => el.id"):
        return self.page.evaluate(f"({script})(document.activeElement)")

    def wait_active(self, element_id: str) -> None:
        """The focus on ``element_id`` (scripts move it a task after the event), within 5 s."""
        self.page.wait_for_function(f"() => document.activeElement && document.activeElement.id === '{element_id}'",
                                    timeout=5_000)

    def close(self) -> None:
        self.context.close()


def filled(user, pairs: int = 15) -> Conversation:
    conversation = make_conversation(user)
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"About module {i}: " + "requirement " * 200)
        message_append(session=session, role="assistant", content=f"Module {i} plan: " + "decision " * 200)
    return conversation


def test_notices_keep_one_of_a_kind_dismiss_and_expire_when_their_event_happened(live, alice, chromium):
    p = Page(chromium, live, alice, filled(alice))
    page = p.page
    send(page, "/compress --preview")
    page.locator(PREVIEWS).wait_for(timeout=10_000)
    send(page, "/compress --preview auth flow")
    page.locator(PREVIEWS, has_text="focusing on “auth flow”").wait_for(timeout=10_000)
    assert p.count(PREVIEWS) == 1 and p.count("#notices .notice") == 1  # the newer preview replaced the older

    # Dismissed: gone, and the focus is not lost with it.
    page.locator(PREVIEWS).locator(".dismiss").focus()
    page.keyboard.press("Enter")
    assert p.count(PREVIEWS) == 0
    # The focus moves once the click has been handled (a task later): waited for, not sampled.
    p.wait_active("composer-text")

    # A script's insertion is de-duplicated too; a timed notice goes by itself.
    page.evaluate("""() => {
        const html = k => `<p class="notice info" data-kind="${k}" data-expires-after="1"><span class="notice-text">${k}</span></p>`;
        const n = document.getElementById('notices');
        n.insertAdjacentHTML('beforeend', html('probe') + html('other'));
        n.insertAdjacentHTML('beforeend', html('probe'));
    }""")
    page.wait_for_function("() => document.querySelectorAll('#notices [data-kind=probe]').length === 1")
    page.wait_for_function("() => !document.querySelector('#notices [data-kind=probe], #notices [data-kind=other]')",
                           timeout=5_000)

    # "Compression queued…" and the preview go once the compression ran on the worker. What
    # landed is recorded as it lands (the compression may end before the test looks).
    send(page, "/compress --preview")
    page.locator(PREVIEWS).wait_for(timeout=10_000)
    page.evaluate("""() => {
        window.landed = [];
        new MutationObserver(records => records.forEach(r => r.addedNodes.forEach(n => {
            if (n.dataset && n.dataset.kind) { window.landed.push(n.dataset.kind); }
        }))).observe(document.getElementById('notices'), {childList: true});
    }""")
    send(page, "/compress")
    page.wait_for_selector("#event-feed li[data-trigger=manual][data-status=compressed]", timeout=60_000)
    page.wait_for_function("() => !document.querySelector('#notices .notice')", timeout=5_000)
    assert page.evaluate("window.landed") == ["compression-queued"]
    assert p.errors == []
    p.close()


def test_the_model_switch_asks_in_a_modal_dialog(live, alice, chromium):
    # Three feasibility warnings for the new model: an unreachable auxiliary route, and its
    # window below both the minimum and the new threshold.
    settings_store.save_group("auxiliary", {"provider": "custom", "base_url": "", "model": "sim-claude-32k"})
    conversation = make_conversation(alice)
    p = Page(chromium, live, alice, conversation)
    page = p.page
    dialog = "#confirm-dialog"

    def ask() -> None:
        page.click("#model-switch-button")
        page.wait_for_selector(f"{dialog}[open] #model-switch-confirm", timeout=10_000)

    sim_control(live, "/_sim/faults", {"fault": "slow=0.2", "count": 1})  # a few seconds of streaming
    send(page, "reply with 100 words while I think about another model")
    page.wait_for_selector("#stop-button:not([disabled])", timeout=15_000)
    turn = Turn.objects.get(conversation=conversation)
    page.click("#model-switch summary")
    page.select_option("#switch-model", "simulator:sim-claude-1m")
    ask()
    assert page.evaluate(f"document.querySelector('{dialog}').matches(':modal')")
    assert p.count("#notices #model-switch-confirm") == 0  # moved out of the notices
    p.wait_active("model-switch-cancel")  # the safest control
    for key in ["Tab", "Tab", "Tab", "Shift+Tab", "Shift+Tab", "Shift+Tab", "Shift+Tab"]:
        page.keyboard.press(key)
        assert p.active(f"el => !!el.closest('{dialog}')"), key

    # The warnings one under another, each as wide as the list.
    boxes = page.eval_on_selector_all(f"{dialog} .confirm-warnings li", "els => els.map(e => e.getBoundingClientRect())"
                                      ".map(r => ({top: r.top, bottom: r.bottom, width: r.width}))")
    width = page.evaluate(f"document.querySelector('{dialog} .confirm-warnings').getBoundingClientRect().width")
    assert len(boxes) == 3
    assert all(b["top"] >= a["bottom"] - 1 for a, b in zip(boxes, boxes[1:]))
    assert all(b["width"] > 0.8 * width for b in boxes)

    # Esc answers the question only: the turn runs on, the focus goes back to the button.
    turn.refresh_from_db()
    assert turn.status == "running"
    page.keyboard.press("Escape")
    page.wait_for_function(f"() => !document.querySelector('{dialog}').open")
    p.wait_active("model-switch-button")
    assert wait_turn(turn).status == "done"
    assert page.locator("#transcript [data-role=stopped]").count() == 0

    # Cancel closes it too; confirming switches.
    ask()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "notices-model-switch-dialog-1440x900.png"))
    page.click("#model-switch-cancel")
    page.wait_for_function(f"() => !document.querySelector('{dialog}').open")
    p.wait_active("model-switch-button")
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-64k"
    ask()
    with page.expect_navigation():
        page.click("#model-switch-confirm-button")
    open_socket(page)
    assert "Simulator Claude 1M" in page.inner_text("#route")
    wait_for(lambda: Conversation.objects.get(id=conversation.id).model == "sim-claude-1m", 10, what="the switch")
    assert p.errors == []
    p.close()
