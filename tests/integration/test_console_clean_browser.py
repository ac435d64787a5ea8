"""One walk through the product in headless Chromium against the real stack (Daphne, a Celery
worker, Redis, the simulator), failing on any console error, uncaught page error or
content-security-policy violation on the way: a chat reply, a markdown reply, a message queued
behind a running turn and another cancelled from the queue, Stop in the middle of a slow reply, a
failed turn and Retry, `/compress` typed in the composer, the sidebar's search opening another
conversation, the compaction preview, Edit last message and a model switch.

htmx logs `console.error` for every out-of-band fragment whose target is not on the page, so a
clean console also proves that the fragments pushed over the socket only target what the page has.
One page, one browser, a reload only where the product navigates."""
from __future__ import annotations

import re

import pytest

from sessions.models import Conversation, Turn
from sessions.services.context import message_append, session_active
from tests.browser import browser
from tests.integration.helpers import make_conversation, sim_control
from tests.integration.test_browser_conversation import login, open_socket
from tests.integration.test_chat_browser import LAPTOP, slow_next

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

# Every CSP violation, reported to the test the moment it happens (a window array would be lost
# on the walk's navigations).
REPORT_CSP = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber} ` +
                        `(${(e.sample || "").slice(0, 80)})`);
}, true);
"""


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    sim_control(live, "/_sim/faults", {"clear": True})


class Console:
    """What the page said that it should not have, each item with the step it happened in."""

    def __init__(self, page):
        self.step = "start"
        self.problems: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.problems.append(f"[{self.step}] page error: {exc}"))
        page.expose_binding("__cspViolation", lambda _source, text: self.problems.append(f"[{self.step}] CSP: {text}"))
        page.add_init_script(REPORT_CSP)

    def _console(self, message) -> None:
        text = message.text
        if message.type == "error" or (message.type == "warning" and "Content Security Policy" in text):
            self.problems.append(f"[{self.step}] console {message.type}: {text}")

    def at(self, step: str) -> None:
        self.step = step


def seeded(user, title: str, exchanges: int) -> Conversation:
    """A conversation with some history already in it (enough for a compaction to have a middle)."""
    conversation = make_conversation(user)
    Conversation.objects.filter(id=conversation.id).update(title=title)
    session = session_active(conversation)
    for i in range(exchanges):
        message_append(session=session, role="user", content=f"About module {i}: " + "requirement " * 60)
        message_append(session=session, role="assistant", content=f"Module {i} plan: " + "decision " * 60)
    return conversation


def assistant_says(page, start: str, timeout: float = 30_000) -> None:
    page.wait_for_function(
        "start => [...document.querySelectorAll('#transcript > [data-role=assistant] .text')]"
        ".some(e => e.innerText.startsWith(start))", arg=start, timeout=timeout)


def socket_ready(page) -> None:
    open_socket(page)
    page.locator("#composer-text").wait_for()


def test_a_walk_through_chat_compaction_preview_and_model_switch_keeps_the_console_clean(live, alice):
    main = seeded(alice, "Module planning", 8)
    other = seeded(alice, "Osprey migration notes", 1)
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        page = b.new_context(viewport=LAPTOP).new_page()
        console = Console(page)
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{main.id}/")
        socket_ready(page)
        composer = page.locator("#composer-text")

        def send(text: str) -> None:
            composer.fill(text)
            composer.press("Enter")

        console.at("chat")
        send("hello there")
        assistant_says(page, 'You said: "hello there"')

        console.at("markdown reply")
        send("please answer in markdown")
        reply = page.locator("#transcript > [data-role=assistant] .markdown").last
        try:
            reply.locator("table").wait_for(timeout=60_000)
        except Exception:  # say what the page and the database held (seen once under a 3-worker run)
            turns = list(Turn.objects.filter(conversation=main).values_list("id", "status", "text", "error"))
            tail = page.evaluate("[...document.querySelectorAll('#transcript > *')].slice(-4)"
                                 ".map(e => e.outerHTML.slice(0, 600)).join('\\n')")
            raise AssertionError(f"no markdown table; turns {turns}; transcript ends with:\n{tail}") from None
        assert reply.locator("pre code").count() >= 1 and reply.locator("ol > li").count() == 3

        console.at("queue, cancel and stop")
        slow_next(live, 0.25)  # some 8 s of streaming: time to queue, cancel and stop inside it
        send("reply with 300 words about the queue")
        page.wait_for_function("() => { const s = document.querySelector('[data-role=streaming] .text'); "
                               "return s && s.textContent.length > 20; }", timeout=30_000)
        send("the queued question")
        queued = page.locator("#queue [data-role=queued]")
        queued.first.wait_for(timeout=10_000)
        page.wait_for_function("() => document.querySelector('#composer-text').value === ''", timeout=10_000)
        send("a message I take back")
        page.wait_for_function("() => document.querySelectorAll('#queue [data-role=queued]').length === 2")
        queued.filter(has_text="take back").get_by_role("button", name="Cancel").click()
        page.wait_for_function("() => document.querySelectorAll('#queue [data-role=queued]').length === 1")
        page.get_by_role("button", name="Stop").click()
        page.locator("#transcript > [data-role=turn-stopped]").wait_for(timeout=15_000)
        assistant_says(page, 'You said: "the queued question"')  # the queued one runs after the stop
        page.wait_for_function("() => document.querySelectorAll('#queue [data-role=queued]').length === 0")
        composer.fill("")  # the cancelled text came back to the composer

        console.at("failed turn and retry")
        sim_control(live, "/_sim/faults", {"fault": "500", "count": 3})  # the call and the SDK's two retries
        send("this question meets a broken model")
        failed = page.locator("#transcript > [data-role=turn-failed]")
        failed.wait_for(timeout=60_000)
        failed.get_by_role("button", name="Retry").click()
        assistant_says(page, 'You said: "this question meets a broken model"')
        page.get_by_role("button", name="Regenerate").wait_for(timeout=30_000)  # the turn has ended

        console.at("compaction")
        send("/compress")
        page.wait_for_selector("#event-feed li[data-trigger=manual][data-status=compressed]", timeout=60_000)
        page.locator("#transcript > [data-role=summary]").wait_for(timeout=10_000)
        page.wait_for_function("() => !document.querySelector('#turn-status [data-role=compacting]')", timeout=10_000)
        send("a question after the compaction")  # the compaction summarised the last one: this one is left to edit
        assistant_says(page, 'You said: "a question after the compaction"')

        console.at("sidebar search")
        page.fill("#sidebar-q", "Osprey")
        hit = page.locator("#sidebar-results a", has_text="Osprey migration notes").first
        hit.wait_for(timeout=15_000)
        hit.click()
        page.wait_for_url(re.compile(rf".*/conversations/{other.id}/$"))
        socket_ready(page)
        assert page.locator("#conversation-title").inner_text() == "Osprey migration notes"
        page.locator(f"#sidebar-results a[href='/conversations/{main.id}/']").first.click()  # retitled by its first reply
        page.wait_for_url(re.compile(rf".*/conversations/{main.id}/$"))
        socket_ready(page)

        # The steps below are written by role and visible text: their markup is being reworked.
        console.at("compaction preview")
        page.get_by_role("button", name=re.compile(r"^Preview and edit")).click()
        page.get_by_role("heading", name="Preview a compression").wait_for(timeout=30_000)
        page.get_by_role("link", name=re.compile(r"^(Cancel|Back to the conversation)$")).first.click()
        page.wait_for_url(re.compile(rf".*/conversations/{main.id}/$"))
        socket_ready(page)

        console.at("edit last message")
        page.get_by_text("Edit last message").click()
        edit = page.get_by_role("textbox", name="Edited message")
        edit.fill("the edited question")
        page.get_by_role("button", name="Resend").click()
        assistant_says(page, 'You said: "the edited question"')
        page.get_by_role("button", name="Regenerate").wait_for(timeout=30_000)

        console.at("model switch")
        page.get_by_text("Switch model", exact=True).first.click()
        page.get_by_role("combobox", name="Model").select_option("simulator:sim-claude-200k")
        page.get_by_role("button", name="Switch…").click()
        page.get_by_text("The prompt cache starts cold").wait_for(timeout=10_000)
        page.get_by_role("button", name="Switch model", exact=True).last.click()  # the confirmation's
        page.locator("#transcript [data-role=model-switch]").wait_for(timeout=15_000)
        socket_ready(page)
        assert "200K" in page.locator("#route").inner_text()

        console.at("end")
        page.wait_for_timeout(300)  # anything the last swaps still had to say
        assert console.problems == [], "\n".join(console.problems)
