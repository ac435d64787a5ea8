"""The conversation page in headless Chromium against the real stack: streaming, tool calls,
a live compression with the gauge dropping, /compress with a topic, a dropped and restored socket,
isolation, and the settings change moving the gauge's threshold marker without a reload."""
from __future__ import annotations

import re

import pytest

from compression.core.thresholds import compute_threshold_tokens
from sessions.models import Conversation, Turn
from sessions.services.context import message_append, session_active
from sessions.services.turns import turn_submit
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import sim_control, wait_turn

pytestmark = [pytest.mark.integration, pytest.mark.browser]

LOG = "\n".join(f"line {i}: step {i} compiled module_{i}.py in {i * 7} ms, cache key {i:08x}" for i in range(260))


def login(page, base: str, username: str, password: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))


def open_last_summary(page, text: str):
    """Click the newest summary divider open until it shows ``text``: the page may put the divider
    in again (a live update after the compaction) just after a click, closed."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(5):
        divider = page.locator("[data-role=summary]").last
        if not divider.locator("details").evaluate("d => d.open"):
            divider.locator("summary").click()
        try:
            divider.get_by_text(text).wait_for(timeout=3_000)
            return divider
        except PlaywrightTimeout:
            continue
    return page.locator("[data-role=summary]").last


def open_socket(page) -> None:
    """Wait until the socket is open and its first message, the live panels re-rendered from the
    database, has landed (static/js/conversation.js marks the socket's element then). An open
    socket alone is not enough: a step taken before that message lands has its work re-rendered
    under it (the edit box typed in went back to the text it was served with)."""
    page.wait_for_function("() => { const ws = document.querySelector('[ws-connect]'); "
                           "return ws && ws.dataset.live === 'synced' && ws['htmx-internal-data'] "
                           "&& ws['htmx-internal-data'].webSocket "
                           "&& ws['htmx-internal-data'].webSocket.socket.readyState === 1; }", timeout=30_000)


def send(page, text: str) -> None:
    page.fill("#composer-text", text)
    page.press("#composer-text", "Enter")


def gauge_tokens(page) -> int:
    return int(page.get_attribute("#gauge", "data-tokens"))


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})


def test_the_conversation_page_end_to_end(live, alice, bob):
    base = f"http://127.0.0.1:{live.web_port}"
    ARTIFACTS.mkdir(exist_ok=True)
    with browser() as b:
        page = b.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        login(page, base, "alice", "alice-password-1")
        page.click("#new-conversation")
        page.wait_for_url(re.compile(r".*/conversations/[0-9a-f-]+/$"))
        conversation = Conversation.objects.get(owner=alice)
        conversation.model = "sim-claude-64k"
        conversation.save()
        page.reload()
        open_socket(page)
        assert "offline simulator" in page.inner_text(".model")

        # Streaming: a slow stream shows partial text before the final message replaces it.
        sim_control(live, "/_sim/faults", {"fault": "slow=0.1", "count": 1})
        send(page, "reply with 120 words about streaming")
        page.wait_for_selector("[data-role=user] >> text=about streaming", timeout=10_000)
        page.wait_for_function("() => { const s = document.querySelector('[data-role=streaming] .text'); "
                               "return s && s.textContent.length > 20; }", timeout=20_000)
        page.wait_for_selector("[data-role=assistant] .text", timeout=30_000)
        assert page.locator("[data-role=streaming]").count() == 0
        assert page.input_value("#composer-text") == ""

        # A tool call and its result, collapsible.
        conversation.workspace.mkdir(parents=True, exist_ok=True)
        (conversation.workspace / "notes.txt").write_text("the deploy key rotates every 30 days\n")
        send(page, "read notes.txt")
        page.wait_for_selector("details.tool-call >> text=read_file", timeout=30_000)
        page.wait_for_selector("[data-role=tool] >> text=read_file", timeout=30_000)
        wait_turn(Turn.objects.filter(conversation=conversation).latest("id"))

        # Push the context near the threshold (as the gauge counts it: stored per-message counts),
        # then past it with a large tool result.
        session = session_active(conversation)
        for i in range(36):
            message_append(session=session, role="user", content=f"About module {i}: " + "requirement " * 600)
            message_append(session=session, role="assistant", content=f"Module {i} plan: " + "decision " * 600)
        session.last_prompt_tokens = 0  # the seeded rows were never sent: the gauge estimates
        session.save(update_fields=["last_prompt_tokens"])
        (conversation.workspace / "build.log").write_text(LOG)
        page.reload()
        open_socket(page)
        before = gauge_tokens(page)
        assert before > int(page.get_attribute("#gauge", "data-threshold")) * 0.8
        page.screenshot(path=str(ARTIFACTS / "conversation-before-compression.png"))
        send(page, "read build.log")
        page.wait_for_selector("#event-feed li[data-status=compressed]", timeout=60_000)
        page.wait_for_function(f"() => Number(document.querySelector('#gauge').dataset.tokens) < {before}", timeout=60_000)
        wait_turn(Turn.objects.filter(conversation=conversation).latest("id"))
        assert page.locator("[data-role=summary]").count() >= 1

        # /compress with a focus topic: the focused summary appears in a new divider.
        send(page, "/compress auth flow")
        page.wait_for_selector("#notices >> text=focusing on", timeout=10_000)
        page.wait_for_selector("#event-feed li[data-trigger=manual][data-status=compressed]", timeout=60_000)
        divider = open_last_summary(page, "Focus topic: auth flow")
        assert "Focus topic: auth flow" in divider.inner_text()

        # Drop the socket (restart the web process) while a turn runs; after the reconnect the
        # page re-renders from the database and nothing is missing.
        live.kill("web")
        turn, _ = turn_submit(user=alice, conversation_id=conversation.id, text="reply with 12 words about reconnecting")
        wait_turn(turn)
        live.start_web(port=live.web_port)
        page.wait_for_function("() => document.querySelectorAll('[data-role=user]').length > 0 && "
                               "[...document.querySelectorAll('[data-role=user] .text')].some("
                               "e => e.textContent.includes('reconnecting'))", timeout=60_000)
        count = Conversation.objects.get(id=conversation.id).messages.filter(visible=True).count()
        assert page.locator("#transcript > article").count() == count

        page.screenshot(path=str(ARTIFACTS / "conversation-laptop.png"), full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})
        page.screenshot(path=str(ARTIFACTS / "conversation-phone.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        assert errors == []

        # Another user's URL is refused.
        other = b.new_page()
        login(other, base, "bob", "bob-password-1")
        response = other.goto(f"{base}/conversations/{conversation.id}/")
        assert response.status == 404
        assert "auth flow" not in other.content()


def test_a_saved_threshold_moves_an_open_gauges_marker(live, alice, django_user_model):
    django_user_model.objects.create_superuser("root", password="root-password-1")
    base = f"http://127.0.0.1:{live.web_port}"
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session_active(conversation)
    with browser() as b:
        chat = b.new_page()
        login(chat, base, "alice", "alice-password-1")
        chat.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(chat)
        def marker_pct(threshold: float) -> str:
            tokens = compute_threshold_tokens(200_000, threshold, conversation.max_tokens)
            return f"{round(100 * tokens / 200_000, 1)}%"

        assert chat.get_attribute("#threshold-marker", "x") == marker_pct(0.5)

        admin = b.new_page()
        login(admin, base, "root", "root-password-1")
        admin.goto(f"{base}/admin/")
        admin.click("a[href='/admin/compression/compressionsettings/']")
        admin.fill("#id_threshold", "1.5")
        admin.click("input[name=_save]")
        assert "0.0" in admin.inner_text(".errorlist") or "1.0" in admin.inner_text(".errorlist")
        admin.fill("#id_threshold", "0.6")
        admin.click("input[name=_save]")
        admin.wait_for_selector(".messagelist .success")

        expected = marker_pct(0.6)
        chat.wait_for_function(f"() => document.querySelector('#threshold-marker').getAttribute('x') === '{expected}'",
                               timeout=15_000)
        assert int(chat.get_attribute("#gauge", "data-threshold")) == compute_threshold_tokens(200_000, 0.6, 4096)
