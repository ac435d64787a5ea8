"""The chat in headless Chromium against the real stack (Daphne, a Celery worker, Redis, the
simulator): markdown replies rendered safely (hostile markdown inert in the DOM), a message sent
while a turn runs waiting in order and cancellable, Stop by button and by Esc (also in the middle
of a tool-calling turn), a failed turn kept in the transcript with Retry after a reload, a refused
message kept in the composer, regenerate and edit, a reload mid-stream, scrolling that follows
only from the bottom, dismissable notices and the compaction status line. Screenshots at
1440×900 and 390×844 go to artifacts/."""
from __future__ import annotations

import re
import time

import pytest

from sessions.models import ApiCall, Conversation, Message, Turn
from sessions.services.context import context_messages, message_append, session_active
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import make_conversation, sim_control, wait_for
from tests.integration.test_browser_conversation import login, open_socket, send

pytestmark = [pytest.mark.integration, pytest.mark.browser]
# What the page does with what the socket sends (rendering, Stop, reloads, scrolling) does not depend
# on the database backend; the queue and the regenerate/edit tests (row locks, ordering) run on both.
ONE_DATABASE = pytest.mark.one_database

LAPTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    sim_control(live, "/_sim/faults", {"clear": True})


def wait_turn(turn: Turn, timeout: float = 60.0) -> Turn:
    """The turn once it ended, whichever way (stopped included)."""
    def ended():
        turn.refresh_from_db()
        return turn.status in Turn.FINISHED

    wait_for(ended, timeout, what=f"turn {turn.id} to end")
    return turn


def slow_next(live, seconds: float, count: int = 1) -> None:
    sim_control(live, "/_sim/faults", {"fault": f"slow={seconds}", "count": count})


class Chat:
    """A logged-in page on a fresh conversation of alice's, with its socket open."""

    def __init__(self, b, live, user, password: str, conversation: Conversation | None = None):
        self.base = f"http://127.0.0.1:{live.web_port}"
        self.conversation = conversation or make_conversation(user)
        self.context = b.new_context(viewport=LAPTOP)
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        login(self.page, self.base, user.get_username(), password)
        self.open()

    def open(self) -> None:
        self.page.goto(f"{self.base}/conversations/{self.conversation.id}/")
        open_socket(self.page)

    def send(self, text: str) -> None:
        send(self.page, text)

    def wait_streaming(self, chars: int = 20) -> None:
        self.page.wait_for_function(
            f"() => {{ const s = document.querySelector('[data-role=streaming] .text'); "
            f"return s && s.textContent.length > {chars}; }}", timeout=30_000)

    def wait_idle(self) -> None:
        wait_for(lambda: not Turn.objects.filter(conversation=self.conversation,
                                                 status__in=("queued", "running")).exists(),
                 60, what="the conversation's turns to finish")

    def texts(self, role: str) -> list[str]:
        return self.page.eval_on_selector_all(f"#transcript > [data-role={role}] .text", "els => els.map(e => e.innerText)")

    def shoot(self, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        self.page.set_viewport_size(LAPTOP)
        self.page.screenshot(path=str(ARTIFACTS / f"chat-{name}-1440x900.png"))
        self.page.set_viewport_size(PHONE)
        self.page.screenshot(path=str(ARTIFACTS / f"chat-{name}-390x844.png"), full_page=True)
        assert self.page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), name
        self.page.set_viewport_size(LAPTOP)


def chat(b, live, alice) -> Chat:
    return Chat(b, live, alice, "alice-password-1")


HOSTILE = ("Repeat exactly: [click me](javascript:window.__pwned=1) <img src=x onerror=\"window.__pwned=2\">\n"
           "<script>window.__pwned=3</script> [fine](https://example.com/ok) "
           "<a href=\"javascript:window.__pwned=4\">raw link</a> ![pic](javascript:window.__pwned=5)\n"
           "[encoded](jav&#x61;script:window.__pwned=6) <iframe src=\"javascript:window.__pwned=7\"></iframe>")


@ONE_DATABASE
def test_markdown_replies_render_safely_and_user_text_shows_as_written(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        c.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=c.base)
        page = c.page
        c.send("please answer in markdown")
        reply = page.locator("#transcript > [data-role=assistant] .markdown").last
        reply.locator("table").wait_for(timeout=30_000)
        assert reply.locator("h2").inner_text() == "Plan"
        assert reply.locator("ol > li").count() == 3 and reply.locator("strong").inner_text() == "configuration"
        assert reply.locator("th").count() == 3 and reply.locator("td").count() == 6
        assert reply.locator("pre.highlight code.language-python span.k").count() >= 1  # Pygments tokens
        link = reply.locator("a[href='https://docs.example.com/compression']")
        assert link.get_attribute("rel") == "noopener noreferrer"
        # The code block's copy button puts exactly the code on the clipboard.
        reply.locator(".copy-code").click()
        page.wait_for_function("() => document.querySelector('.markdown .copy-code').textContent === 'Copied'")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("def threshold(window: int") and "Copy" not in copied

        # A user message is shown as written: escaped, its line breaks kept.
        page.fill("#composer-text", "<b>not bold</b> & <i>not italic</i>\nsecond line")
        page.press("#composer-text", "Enter")
        user = page.locator("#transcript > [data-role=user] .text").last
        user.wait_for()
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=user] .text')]"
                               ".some(e => e.innerText.includes('second line'))")
        assert user.inner_text() == "<b>not bold</b> & <i>not italic</i>\nsecond line"
        assert user.locator("b, i").count() == 0
        c.wait_idle()

        # Hostile markdown from the model is inert in the rendered DOM.
        c.send(HOSTILE)
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=assistant] .markdown')]"
                               ".some(e => e.textContent.includes('raw link'))", timeout=30_000)
        hostile = page.locator("#transcript > [data-role=assistant] .markdown").last
        assert hostile.locator("script, img, iframe, [onerror], [onclick]").count() == 0
        hrefs = hostile.locator("a").evaluate_all("els => els.map(a => a.getAttribute('href'))")
        assert hrefs == ["https://example.com/ok"], hrefs
        assert hostile.locator("a").get_attribute("rel") == "noopener noreferrer"
        text = hostile.inner_text()
        assert "<img src=x" in text and "<script>" in text  # shown as text, not run
        assert page.evaluate("window.__pwned") is None
        c.shoot("markdown")

        # Streamed text keeps its line breaks while it arrives, then re-renders as markdown.
        slow_next(live, 0.25)
        c.send("Repeat exactly: line one of three words here\nline two follows the first line\n"
               "line three ends it with **bold** text and more words to stream slowly")
        # Read in the same frame as the wait: the stream may end (and be re-rendered) a moment later.
        seen = page.wait_for_function(
            "() => { const s = document.querySelector('[data-role=streaming] .text'); "
            "return s && s.textContent.includes('line two') "
            "&& {whiteSpace: getComputedStyle(s).whiteSpace, text: s.innerText}; }", timeout=30_000).json_value()
        assert seen["whiteSpace"] == "pre-wrap"
        assert "line one of three words here\nline two" in seen["text"]
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=assistant] .markdown strong')]"
                               ".some(e => e.textContent === 'bold')", timeout=30_000)
        last = page.locator("#transcript > [data-role=assistant] .markdown").last
        assert last.locator("br").count() == 2
        assert c.errors == []


def test_a_message_sent_while_a_turn_runs_waits_its_turn_and_can_be_cancelled(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        slow_next(live, 0.6)  # ~20 events: the first reply streams for about 12 s, time to queue and cancel
        c.send("reply with 150 words about the first question")
        c.wait_streaming()
        c.send("the second question comes next")
        queued = page.locator("#queue [data-role=queued]")
        queued.first.wait_for(timeout=10_000)
        assert "the second question comes next" in queued.first.inner_text()
        # The socket may show the queued message before the answer to the send arrives; the
        # composer empties when that answer (2xx) does.
        page.wait_for_function("() => document.querySelector('#composer-text').value === ''", timeout=10_000)
        assert c.texts("user") == ["reply with 150 words about the first question"]  # not in the history yet
        c.send("a third one I will take back")
        page.wait_for_function("() => document.querySelectorAll('#queue [data-role=queued]').length === 2")
        c.shoot("queued")
        page.locator("#queue [data-role=queued]", has_text="take back").locator(".cancel-button").click()
        page.wait_for_function("() => document.querySelectorAll('#queue [data-role=queued]').length === 1")
        # Nothing lost: the cancelled text comes back to the (empty) composer.
        page.wait_for_function("() => document.querySelector('#composer-text').value === 'a third one I will take back'")
        page.locator("#notices .notice", has_text="back in the composer").wait_for()
        try:
            page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=assistant]').length === 2 "
                                   "&& document.querySelectorAll('#queue [data-role=queued]').length === 0", timeout=60_000)
        except Exception as exc:  # say what the page held: a stale queue entry, or a reply still missing
            held = page.evaluate("() => ({queue: document.querySelector('#queue').outerHTML, "
                                 "status: document.querySelector('#turn-status') && document.querySelector('#turn-status').innerText, "
                                 "assistants: document.querySelectorAll('#transcript > [data-role=assistant]').length})")
            turns = list(Turn.objects.filter(conversation=c.conversation).values_list("id", "status"))
            raise AssertionError(f"the queue never emptied: the page held {held}; turns {turns}; console {c.errors}") from exc
        c.wait_idle()
        assert c.texts("user") == ["reply with 150 words about the first question", "the second question comes next"]
        answers = c.texts("assistant")
        assert answers[0].startswith('You said: "reply with 150 words about the first question"')
        assert answers[1].startswith('You said: "the second question comes next"')
        roles = [m.role for m in Message.objects.filter(conversation=c.conversation).order_by("seq")]
        assert roles == ["user", "assistant", "user", "assistant"]
        cancelled = Turn.objects.get(conversation=c.conversation, status="cancelled")
        assert cancelled.text == "a third one I will take back" and cancelled.user_message_id is None
        assert c.errors == []


@ONE_DATABASE
def test_stop_by_button_and_by_esc_keeps_the_partial_reply(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        slow_next(live, 0.25)  # about 32 events: some 8 s of streaming for Stop to land in
        c.send("reply with 300 words about stopping with the button")
        c.wait_streaming(40)
        page.click("#stop-button")
        page.locator("#transcript > [data-role=turn-stopped]").wait_for(timeout=15_000)
        stopped = page.locator("#transcript > .entry.assistant.stopped")
        assert stopped.count() == 1 and stopped.locator("[data-role=stopped]").inner_text() == "stopped"
        assert page.locator("[data-role=streaming]").count() == 0
        turn = wait_turn(Turn.objects.filter(conversation=c.conversation).latest("id"))
        assert turn.status == "stopped"
        partial = Message.objects.get(conversation=c.conversation, role="assistant", stopped=True)
        assert 0 < len(partial.content.split()) < 300
        c.shoot("stopped")

        slow_next(live, 0.25)
        c.send("reply with 300 words about stopping with escape")
        c.wait_streaming(40)
        page.keyboard.press("Escape")
        page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=turn-stopped]').length === 2",
                               timeout=15_000)
        assert wait_turn(Turn.objects.filter(conversation=c.conversation).latest("id")).status == "stopped"

        # The context is valid: the next message is answered, about itself.
        c.send("and now a normal question")
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=assistant] .text')]"
                               ".some(e => e.innerText.startsWith('You said: \"and now a normal question'))", timeout=30_000)
        assert wait_turn(Turn.objects.filter(conversation=c.conversation).latest("id")).status == "done"
        assert c.errors == []


@ONE_DATABASE
def test_stop_in_the_middle_of_a_tool_calling_turn_leaves_a_valid_context(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        c.conversation.workspace.mkdir(parents=True, exist_ok=True)
        (c.conversation.workspace / "a.txt").write_text("alpha line\n")
        (c.conversation.workspace / "b.txt").write_text("beta line\n")
        # The tool call streams slowly, the short report after it (about eight events) more slowly
        # still, so that Stop lands while it streams.
        slow_next(live, 0.4)
        slow_next(live, 1.5)
        c.send("read a.txt and read b.txt")
        page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=tool]').length === 2",
                               timeout=30_000)
        c.wait_streaming(3)  # the report on the tool results is streaming
        page.click("#stop-button")
        page.locator("#transcript > [data-role=turn-stopped]").wait_for(timeout=15_000)
        turn = wait_turn(Turn.objects.filter(conversation=c.conversation).latest("id"))
        assert turn.status == "stopped"
        context = context_messages(session_active(c.conversation))[1:]
        assert [m["role"] for m in context] == ["user", "assistant", "tool", "tool", "assistant"]
        call_ids = [call["id"] for call in context[1]["tool_calls"]]
        assert [m["tool_call_id"] for m in context[2:4]] == call_ids  # every call has its result
        assert "alpha line" in context[2]["content"] and "beta line" in context[3]["content"]
        assert ApiCall.objects.filter(conversation=c.conversation, purpose="agent").count() == 2  # no further call
        c.shoot("stopped-tools")

        c.send("what did you find?")
        page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=assistant]').length >= 3",
                               timeout=30_000)
        assert wait_turn(Turn.objects.filter(conversation=c.conversation).latest("id")).status == "done"
        assert c.errors == []


@ONE_DATABASE
def test_a_failed_turn_stays_where_it_happened_after_a_reload_with_retry(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        sim_control(live, "/_sim/faults", {"fault": "500", "count": 3})  # the call and the SDK's two retries
        c.send("this question meets a broken model")
        failed = page.locator("#transcript > [data-role=turn-failed]")
        failed.wait_for(timeout=60_000)
        assert "model call failed" in failed.inner_text() and failed.locator(".retry-button").is_visible()
        assert page.locator("[data-role=streaming]").count() == 0  # no empty bubble with a cursor
        page.wait_for_function("() => document.querySelector('#turn-status').innerText.startsWith('The last turn failed')")
        c.shoot("failed")

        page.reload()
        open_socket(page)
        entries = page.eval_on_selector_all("#transcript > article", "els => els.map(e => e.dataset.role)")
        assert entries == ["user", "turn-failed"]
        page.click("#transcript > [data-role=turn-failed] .retry-button")
        page.locator("#transcript > [data-role=assistant]").wait_for(timeout=30_000)
        assert c.texts("assistant")[0].startswith('You said: "this question meets a broken model"')
        assert not page.locator("#transcript > [data-role=turn-failed] .retry-button").is_visible()
        assert c.texts("user") == ["this question meets a broken model"]  # retried, not sent twice
        c.wait_idle()
        assert c.errors == []


@ONE_DATABASE
def test_a_refused_message_stays_in_the_composer_with_the_reason_beside_it(live, alice):
    from django.conf import settings

    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        too_long = "x" * (settings.HERMES_MAX_MESSAGE_CHARS + 1)
        page.fill("#composer-text", too_long)
        note = page.locator("#composer-length")
        assert note.is_visible() and "too long to send" in note.inner_text()
        assert page.input_value("#composer-text") == too_long  # the paste was not cut
        page.press("#composer-text", "Enter")
        page.locator("#composer-error .notice.error").wait_for(timeout=10_000)
        assert "too long" in page.inner_text("#composer-error")
        assert page.input_value("#composer-text") == too_long
        c.shoot("refused")

        page.fill("#composer-text", "/frobnicate the widget")
        assert page.locator("#composer-error .notice").count() == 0  # typing clears the old reason
        page.press("#composer-text", "Enter")
        page.wait_for_function("() => document.querySelector('#composer-error').textContent.includes('not a command')")
        assert page.input_value("#composer-text") == "/frobnicate the widget"
        assert not Turn.objects.filter(conversation=c.conversation).exists()
        assert c.errors == []


def test_regenerate_and_edit_archive_what_they_replace(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        c.send("a question to answer twice")
        page.locator("#regenerate-button").wait_for(timeout=30_000)
        first = c.texts("assistant")
        page.click("#regenerate-button")
        page.wait_for_function("() => document.querySelectorAll('#transcript > [data-role=replaced]').length === 1 "
                               "&& document.querySelectorAll('#transcript > [data-role=assistant]').length === 1",
                               timeout=30_000)
        page.locator("#regenerate-button").wait_for(timeout=30_000)
        assert page.locator("#transcript > [data-role=replaced] summary").inner_text() == "Replaced reply (archived)"

        page.click("#edit-last summary")
        assert page.input_value("#edit-text") == "a question to answer twice"
        page.fill("#edit-text", "the edited question")
        page.click("#edit-resend")
        page.wait_for_function("() => [...document.querySelectorAll('#transcript > [data-role=assistant] .text')]"
                               ".some(e => e.innerText.startsWith('You said: \"the edited question'))", timeout=30_000)
        c.wait_idle()
        assert c.texts("user") == ["the edited question"]
        assert page.locator("#transcript > [data-role=replaced]").count() == 3
        rows = Message.objects.filter(conversation=c.conversation)
        assert rows.count() == 5 and rows.filter(replaced=True, archived=True).count() == 3  # nothing deleted
        assert first[0] in [m.content for m in rows.filter(replaced=True)]
        c.shoot("edited")
        assert c.errors == []


@ONE_DATABASE
def test_a_reload_mid_stream_shows_the_text_so_far_and_carries_on(live, alice):
    with browser() as b:
        c = chat(b, live, alice)
        page = c.page
        slow_next(live, 0.25)  # about 28 events: some 7 s of streaming, long enough to reload inside
        c.send("reply with 250 words about reloading in the middle")
        c.wait_streaming(60)
        time.sleep(1.2)  # the worker saves the text so far about once a second
        page.reload()
        shown = page.locator("[data-role=streaming] .text").inner_text()  # as the page was served
        assert shown.startswith('You said: "reply with 250 words about reloading')
        open_socket(page)
        page.wait_for_function(f"() => {{ const s = document.querySelector('[data-role=streaming] .text'); "
                               f"return s && s.textContent.length > {len(shown)}; }}", timeout=30_000)
        page.locator("#transcript > [data-role=assistant]").wait_for(timeout=60_000)
        assert page.locator("[data-role=streaming]").count() == 0
        final = c.texts("assistant")[0]
        assert final.startswith(shown.strip()[:80]) and len(final.split()) == 250
        assert c.errors == []


@ONE_DATABASE
def test_the_transcript_follows_only_from_the_bottom_and_notices_dismiss(live, alice):
    with browser() as b:
        conversation = make_conversation(alice)
        session = session_active(conversation)
        for i in range(20):
            message_append(session=session, role="user", content=f"earlier question {i}")
            message_append(session=session, role="assistant", content=f"earlier answer {i}\n" + "words " * 80)
        c = Chat(b, live, alice, "alice-password-1", conversation)
        page = c.page
        # At the bottom of a transcript laid out taller than its box: before the stylesheet has
        # applied, everything fits, "the top" is the bottom too, and the page rightly keeps following.
        at_bottom = ("() => { const t = document.querySelector('#transcript'); "
                     "return t.scrollHeight > t.clientHeight + 400 && t.scrollHeight - t.scrollTop - t.clientHeight < 45; }")
        page.wait_for_function(at_bottom)
        page.evaluate("document.querySelector('#transcript').scrollTop = 0")
        page.dispatch_event("#transcript", "scroll")
        page.wait_for_function("() => { const t = document.querySelector('#transcript'); "
                               "return t.scrollTop === 0 && t.scrollHeight > t.clientHeight + 400; }")
        slow_next(live, 0.08)
        c.send("reply with 120 words while I read above")
        c.wait_streaming(60)
        page.locator("#transcript > [data-role=assistant]").nth(20).wait_for(timeout=30_000)
        assert page.evaluate("document.querySelector('#transcript').scrollTop") == 0  # not pulled down

        page.evaluate("const t = document.querySelector('#transcript'); t.scrollTop = t.scrollHeight")
        page.dispatch_event("#transcript", "scroll")
        c.send("reply with 40 words now that I am at the bottom")
        page.locator("#transcript > [data-role=assistant]").nth(21).wait_for(timeout=30_000)
        page.wait_for_function(at_bottom)

        c.send("/compress --preview")
        notice = page.locator("#notices .notice", has_text="Preview:")
        notice.wait_for(timeout=10_000)
        notice.locator(".dismiss").click()
        assert page.locator("#notices .notice", has_text="Preview:").count() == 0
        assert c.errors == []


@ONE_DATABASE
def test_the_status_line_says_compacting_with_the_elapsed_time(live, alice):
    with browser() as b:
        conversation = make_conversation(alice)
        session = session_active(conversation)
        for i in range(15):
            message_append(session=session, role="user", content=f"About module {i}: " + "requirement " * 200)
            message_append(session=session, role="assistant", content=f"Module {i} plan: " + "decision " * 200)
        c = Chat(b, live, alice, "alice-password-1", conversation)
        page = c.page
        slow_next(live, 0.1)  # the summariser's answer streams slowly
        c.send("/compress")
        compacting = page.locator("#turn-status [data-role=compacting]")
        compacting.wait_for(timeout=20_000)
        page.wait_for_function("() => /Compacting context… [1-9][0-9]* s/.test("
                               "document.querySelector('#turn-status').innerText)", timeout=20_000)
        assert re.search(r"Compacting context… \d+ s", page.inner_text("#turn-status"))
        c.shoot("compacting")
        page.wait_for_selector("#event-feed li[data-trigger=manual][data-status=compressed]", timeout=90_000)
        page.wait_for_function("() => !document.querySelector('#turn-status [data-role=compacting]')", timeout=10_000)
        assert c.errors == []
