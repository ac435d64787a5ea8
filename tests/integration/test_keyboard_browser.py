"""Where the eye and the keyboard land, in headless Chromium against the real stack (Daphne, a
Celery worker, Redis, the simulator): after Stop, Regenerate, Retry, Edit → Resend and Edit →
Cancel the focus is in the composer, never on <body>; an edit of the last message keeps the
bottom of a long transcript (and so the new reply) in view; Enter in the edit box resends and
Shift+Enter is a newline, as in the composer, and its placeholder says so. On a phone (390×844)
the code block's Copy button covers no code, the composer's placeholder fits in its rows and the
top bar is one line, every control in it still reachable and named. Any console error fails."""
from __future__ import annotations

import pytest

from sessions.models import Turn
from sessions.services.context import message_append, session_active
from tests.browser import browser
from tests.integration.helpers import make_conversation, session_cookie, sim_control, wait_for
from tests.integration.test_browser_conversation import open_socket, send
from tests.integration.test_chat_browser import slow_next

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

FOCUS = "document.activeElement && document.activeElement.id"
AT_BOTTOM = """() => { const t = document.querySelector('#transcript');
  return t.scrollHeight > t.clientHeight && t.scrollHeight - t.scrollTop - t.clientHeight < 45; }"""
# The last reply's bottom edge is inside the transcript's visible box.
LAST_REPLY_IN_VIEW = """() => { const t = document.querySelector('#transcript').getBoundingClientRect();
  const replies = document.querySelectorAll('#transcript > [data-role=assistant]');
  const r = replies[replies.length - 1].getBoundingClientRect();
  return r.bottom <= t.bottom + 1 && r.bottom > t.top; }"""


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    sim_control(live, "/_sim/faults", {"clear": True})


class Tab:
    """A page signed in as `user` (by cookie: no login page) that records console errors and
    uncaught exceptions."""

    def __init__(self, b, live, user, viewport: dict):
        self.base = f"http://127.0.0.1:{live.web_port}"
        self.context = b.new_context(viewport=viewport)
        self.context.add_cookies([{"name": "sessionid", "value": session_cookie(user), "url": self.base}])
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def open(self, path: str) -> None:
        self.page.goto(self.base + path)

    def replies(self) -> int:
        return self.page.locator("#transcript > [data-role=assistant]").count()

    def wait_replies(self, n: int) -> None:
        self.page.wait_for_function(
            f"() => document.querySelectorAll('#transcript > [data-role=assistant]').length === {n} "
            "&& !document.querySelector('[data-role=streaming]')", timeout=30_000)


def long_conversation(user):
    conversation = make_conversation(user)
    session = session_active(conversation)
    for i in range(20):
        message_append(session=session, role="user", content=f"earlier question {i}")
        message_append(session=session, role="assistant", content=f"earlier answer {i}\n" + "words " * 60)
    return conversation


def idle(conversation):
    wait_for(lambda: not Turn.objects.filter(conversation=conversation, status__in=("queued", "running")).exists(),
             60, what="the conversation's turns to finish")


def test_every_action_gives_the_focus_to_the_composer_and_an_edit_keeps_the_bottom_in_view(live, alice):
    conversation = long_conversation(alice)
    with browser() as b:
        tab = Tab(b, live, alice, LAPTOP)
        page = tab.page
        tab.open(f"/conversations/{conversation.id}/")
        open_socket(page)
        page.wait_for_function(AT_BOTTOM)

        # Stop, by keyboard on its button: the button leaves the page, the focus does not fall to <body>.
        slow_next(live, 0.25)
        send(page, "reply with 300 words about stopping")
        page.wait_for_function("() => { const s = document.querySelector('[data-role=streaming] .text'); "
                               "return s && s.textContent.length > 20; }", timeout=30_000)
        page.focus("#stop-button")
        page.keyboard.press("Enter")
        page.locator("#transcript > [data-role=turn-stopped]").wait_for(timeout=15_000)
        page.locator("#regenerate-button").wait_for(timeout=15_000)
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)

        # Regenerate, by keyboard.
        before = tab.replies()
        page.focus("#regenerate-button")
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=replaced]').length === 1",
                               timeout=15_000)
        tab.wait_replies(before)  # the stopped reply is archived, the new one takes its place
        idle(conversation)
        page.locator("#regenerate-button").wait_for(timeout=15_000)
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        page.wait_for_function(AT_BOTTOM)

        # Edit → Cancel, by its button and by Esc: the box closes, the composer has the focus.
        page.click("#edit-last summary")
        page.wait_for_function(f"() => {FOCUS} === 'edit-text'")  # the caret goes into the box as it opens
        page.focus("#edit-cancel")
        page.keyboard.press("Enter")
        assert page.evaluate("document.querySelector('#edit-last').open") is False
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        page.click("#edit-last summary")
        page.wait_for_function(f"() => {FOCUS} === 'edit-text'")
        page.keyboard.press("Escape")
        assert page.evaluate("document.querySelector('#edit-last').open") is False
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)

        # Edit → Resend: Enter resends, Shift+Enter is a newline, and the placeholder says so.
        page.click("#edit-last summary")
        page.wait_for_function(f"() => {FOCUS} === 'edit-text'")
        placeholder = page.get_attribute("#edit-text", "placeholder")
        assert "Enter resends" in placeholder and "Shift+Enter for a new line" in placeholder
        page.fill("#edit-text", "the edited")
        page.keyboard.press("Shift+Enter")
        page.keyboard.type("question")
        assert page.input_value("#edit-text") == "the edited\nquestion"  # a newline, nothing sent
        assert page.evaluate("document.querySelector('#edit-last').open") is True
        before = tab.replies()
        page.keyboard.press("Enter")
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=assistant] .text')]"
                               ".some(e => e.innerText.startsWith('You said: \"the edited'))", timeout=30_000)
        tab.wait_replies(before)
        idle(conversation)
        page.locator("#regenerate-button").wait_for(timeout=15_000)
        # The transcript was re-sent whole; the reader is still at its bottom, the new reply in view.
        assert page.evaluate("document.querySelector('#transcript').scrollTop") > 0
        page.wait_for_function(AT_BOTTOM, timeout=5_000)
        assert page.evaluate(LAST_REPLY_IN_VIEW)
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        assert page.locator("#transcript > [data-role=user] .text").last.inner_text() == "the edited\nquestion"

        # Retry a failed turn, by keyboard.
        sim_control(live, "/_sim/faults", {"fault": "500", "count": 3})  # the call and the SDK's two retries
        page.focus("#compress-topic")  # somewhere else first: the focus must move, not stay
        send(page, "this question meets a broken model")
        retry = page.locator("#transcript > [data-role=turn-failed] .retry-button")
        retry.wait_for(timeout=60_000)
        before = tab.replies()
        retry.focus()
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        tab.wait_replies(before + 1)
        idle(conversation)
        page.locator("#regenerate-button").wait_for(timeout=15_000)
        page.wait_for_function(f"() => {FOCUS} === 'composer-text'", timeout=5_000)
        page.wait_for_function(AT_BOTTOM, timeout=5_000)
        assert tab.errors == [], "\n".join(tab.errors)
        tab.context.close()


CODE_REPLY = ("Here is the function:\n\n```python\ndef threshold(window: int, reserve: int, percent: float) -> int:"
              "  # the first line is wide\n    return int((window - reserve) * percent / 100)\n```\n\nDone.")

# Every line box of the code's text against the Copy button's box.
COPY_OVERLAPS = """() => {
  const button = document.querySelector('.markdown .copy-code');
  const code = button.parentElement.querySelector('pre code') || button.parentElement.querySelector('pre');
  const b = button.getBoundingClientRect(), range = document.createRange();
  range.selectNodeContents(code);
  return [...range.getClientRects()].filter((r) => r.width > 0 &&
    r.left < b.right && r.right > b.left && r.top < b.bottom && r.bottom > b.top).length;
}"""

# The placeholder laid out as the textarea's own text: its height within the box.
PLACEHOLDER_FITS = """() => {
  const t = document.querySelector('#composer-text');
  const room = t.clientHeight;
  t.value = t.placeholder;
  const needed = t.scrollHeight;
  t.value = '';
  return {room, needed, placeholder: t.placeholder};
}"""

# The top bar's items (the visible ones) share one row, and the bar is as tall as that row.
TOP_BAR = """() => {
  const bar = document.querySelector('.topbar');
  const items = [...bar.querySelectorAll('.brand, .theme-toggle button, .account-button, .account-menu > *')]
    .filter((e) => e.getBoundingClientRect().height > 0 && e.checkVisibility());
  const rects = items.map((e) => e.getBoundingClientRect());
  const tallest = Math.max(...rects.map((r) => r.height));
  const cs = getComputedStyle(bar);
  return {height: bar.getBoundingClientRect().height, tallest,
          padding: parseFloat(cs.paddingTop) + parseFloat(cs.paddingBottom) + parseFloat(cs.borderBottomWidth),
          oneRow: Math.max(...rects.map((r) => r.top)) < Math.min(...rects.map((r) => r.bottom)),
          right: Math.max(...rects.map((r) => r.right)), width: window.innerWidth,
          items: items.map((e) => e.textContent.trim() || e.getAttribute('aria-label'))};
}"""


def test_on_a_phone_the_copy_button_covers_no_code_the_placeholder_fits_and_the_top_bar_is_one_line(
        live, alice, django_user_model):
    conversation = make_conversation(alice)
    session = session_active(conversation)
    message_append(session=session, role="user", content="show me the function")
    message_append(session=session, role="assistant", content=CODE_REPLY)
    root = django_user_model.objects.create_superuser("root", password="root-password-1")
    with browser() as b:
        tab = Tab(b, live, alice, PHONE)
        page = tab.page
        tab.open(f"/conversations/{conversation.id}/")
        open_socket(page)
        page.locator(".markdown .copy-code").wait_for()
        assert page.evaluate(COPY_OVERLAPS) == 0

        fit = page.evaluate(PLACEHOLDER_FITS)
        assert fit["needed"] <= fit["room"], fit
        assert "Enter sends" in fit["placeholder"] and "Shift+Enter" in fit["placeholder"]

        bar = page.evaluate(TOP_BAR)
        assert bar["oneRow"] and bar["right"] <= bar["width"], bar
        assert bar["height"] <= bar["tallest"] + bar["padding"] + 2, bar
        # Every control is there and named: the theme buttons by their words, the account's in its menu.
        for name in ("Auto", "Light", "Dark"):
            assert page.get_by_role("button", name=name, exact=True).is_visible()
        assert not page.get_by_role("button", name="Log out").is_visible()
        page.get_by_role("button", name="Account menu: alice").click()
        page.get_by_role("button", name="Log out").wait_for(state="visible")
        page.keyboard.press("Escape")
        page.get_by_role("button", name="Log out").wait_for(state="hidden")

        # Wider, the full placeholder and the bar as a plain row (no menu button).
        page.set_viewport_size(LAPTOP)
        # The placeholder follows the media query's change event, which fires after the resize.
        page.wait_for_function("() => document.querySelector('#composer-text').placeholder.includes('/compress --preview')",
                               timeout=5000)
        assert page.get_by_role("button", name="Log out").is_visible()
        assert not page.locator("#account-button").is_visible()
        assert page.get_by_role("button", name="Dark", exact=True).inner_text() == "Dark"
        assert tab.errors == [], "\n".join(tab.errors)
        tab.context.close()

        # Staff have two more links: still one line, the links in the menu.
        staff = Tab(b, live, root, PHONE)
        staff.open("/")
        bar = staff.page.evaluate(TOP_BAR)
        assert bar["oneRow"] and bar["right"] <= bar["width"], bar
        staff.page.click("#account-button")
        for link in ("Dashboard", "Admin"):
            staff.page.get_by_role("link", name=link, exact=True).wait_for(state="visible")
        assert staff.errors == [], staff.errors
        staff.context.close()
