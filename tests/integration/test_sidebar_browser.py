"""The conversation sidebar in headless Chromium against the real stack, on a laptop (1440 px: a
column) and on phones (390 and 360 px: a drawer), in the light and the dark scheme: rename in place (a row and the page's heading), delete
with confirmation, search finding a compacted message and opening it in context, and the title
the auxiliary model makes after the first reply arriving live in the heading and the sidebar."""
from __future__ import annotations

import re

import pytest

from compression import settings_store
from sessions import selectors
from sessions.models import Conversation, Message
from sessions.services.context import message_append, session_start
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import sim_control, wait_for
from tests.integration.test_browser_conversation import login, open_socket, send

pytestmark = [pytest.mark.integration, pytest.mark.browser]

FACT = "The kestrel cluster keeps its backups in the north vault for 90 days."
HEIGHTS = {1440: 900, 390: 844, 360: 740}  # width: height


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})


def chat(owner, title: str, *texts: str, archived: bool = False) -> Conversation:
    c = Conversation.objects.create(owner=owner, title=title, provider="simulator", model="sim-claude-64k")
    session = session_start(conversation=c)
    for i, text in enumerate(texts):
        m = message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=text)
        if archived and i == 0:
            Message.objects.filter(pk=m.pk).update(archived=True)
    return c


def wait_or_show(page, selector: str, around: str, timeout: float = 30_000) -> None:
    """Wait for ``selector``; on a time-out, say what the page held instead (the row, the focus)."""
    try:
        page.wait_for_selector(selector, timeout=timeout)
    except Exception as exc:
        state = page.evaluate("(sel) => { const r = document.querySelector(sel); const a = document.activeElement; "
                              "return {row: r ? r.outerHTML : null, active: a ? a.outerHTML.slice(0, 200) : null}; }",
                              around)
        raise AssertionError(f"{selector} never showed; the page held {state}") from exc


class Sidebar:
    """The sidebar as the user reaches it: on a phone the drawer is opened first."""

    def __init__(self, page, narrow: bool) -> None:
        self.page, self.narrow = page, narrow

    def show(self) -> None:
        page = self.page
        if not self.narrow:
            assert page.is_visible("#sidebar")
            return
        if page.get_attribute("#sidebar-toggle", "aria-expanded") == "true":
            return
        page.click("#sidebar-toggle")
        page.wait_for_function("() => document.activeElement && document.activeElement.id === 'sidebar-close'")
        assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "true"
        # Slid in whole: on the screen from its left edge, no wider than the phone.
        page.wait_for_function("() => { const r = document.getElementById('sidebar').getBoundingClientRect(); "
                               "return r.left === 0 && r.right <= window.innerWidth; }")

    def hide(self) -> None:
        """On a phone the drawer covers the page: close it (its close button) to reach the page."""
        if self.narrow and self.page.get_attribute("#sidebar-toggle", "aria-expanded") == "true":
            self.page.click("#sidebar-close")
            self.page.wait_for_function("() => document.activeElement && document.activeElement.id === 'sidebar-toggle'")
            self.page.wait_for_selector("#sidebar", state="hidden")

    def row(self, conversation) -> str:
        return f"#sidebar-row-{conversation.id}"


# The search behind the sidebar differs by backend (FTS5 or tsvector); the drawer and the schemes do
# not: the PostgreSQL pass runs the laptop in the light scheme only.
VARIANTS = [
    pytest.param(width, scheme, id=f"{width}-{scheme}",
                 marks=() if (width, scheme) == (1440, "light") else pytest.mark.one_database)
    for width in HEIGHTS for scheme in ("light", "dark")
]


@pytest.mark.parametrize(("width", "scheme"), VARIANTS)
def test_rename_delete_search_and_a_live_title_in_the_sidebar(live, alice, bob, width, scheme):
    base = f"http://127.0.0.1:{live.web_port}"
    narrow = width < 900
    viewport = f"{width}-{scheme}"
    plan = chat(alice, "Offsite plan", "Which hotel shall we book?", "The one by the river.")
    vault = chat(alice, "Backups", FACT, "Noted.", "And the tapes?", "Kept too.", archived=True)
    chat(bob, "Bob's kestrel notes", "bob's kestrel secret", "ok")
    vault.workspace.mkdir(parents=True, exist_ok=True)
    (vault.workspace / "notes.txt").write_text("vault notes\n")
    ARTIFACTS.mkdir(exist_ok=True)
    with browser() as b:
        page = b.new_page(viewport={"width": width, "height": HEIGHTS[width]}, color_scheme=scheme)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{plan.id}/")
        open_socket(page)
        sidebar = Sidebar(page, narrow)

        # The drawer: closed at first, Esc closes it and the focus goes back to the button.
        if narrow:
            assert not page.is_visible("#sidebar") and page.is_visible("#sidebar-toggle")
            sidebar.show()
            page.keyboard.press("Escape")
            page.wait_for_function("() => document.activeElement && document.activeElement.id === 'sidebar-toggle'")
            assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"
            page.wait_for_selector("#sidebar", state="hidden")
        else:  # a column that collapses and comes back
            assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "true"
            page.click("#sidebar-toggle")
            page.wait_for_selector("#sidebar", state="hidden")
            assert page.get_attribute("#sidebar-toggle", "aria-expanded") == "false"
            page.click("#sidebar-toggle")
            page.wait_for_selector("#sidebar", state="visible")
        sidebar.show()
        assert page.get_attribute(f"{sidebar.row(plan)} .sidebar-link", "aria-current") == "page"
        assert "Bob" not in page.inner_text("#sidebar")
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(ARTIFACTS / f"sidebar-{viewport}.png"))

        # Rename a row in place: an empty title is refused, Esc cancels, Enter saves.
        page.click(f"{sidebar.row(vault)} .rename-button")
        field = f"#rename-input-{vault.id}"
        page.wait_for_function(f"() => document.activeElement && document.activeElement.id === 'rename-input-{vault.id}'")
        page.fill(field, "   ")
        page.press(field, "Enter")
        page.wait_for_selector(f"#rename-error-{vault.id} >> text=cannot be empty")
        page.press(field, "Escape")
        wait_or_show(page, f"{sidebar.row(vault)} .rename-button", sidebar.row(vault))
        assert page.inner_text(f"#sidebar-title-{vault.id}") == "Backups"
        # Esc the moment the refusal is swapped in, before htmx has wired up the new row (its
        # swap settles 20 ms later): the rename is still cancelled.
        page.click(f"{sidebar.row(vault)} .rename-button")
        page.wait_for_function(f"() => document.activeElement && document.activeElement.id === 'rename-input-{vault.id}'")
        page.fill(field, "   ")
        page.evaluate("""(id) => new Promise((resolve) => {
            const watch = new MutationObserver(() => {
                const error = document.getElementById('rename-error-' + id);
                if (!error || !error.textContent.includes('cannot be empty')) { return; }
                watch.disconnect();
                document.getElementById('rename-input-' + id).focus();
                window.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
                resolve();
            });
            watch.observe(document.getElementById('sidebar-wrap'), {subtree: true, childList: true});
            document.getElementById('rename-input-' + id).form.requestSubmit();
        })""", str(vault.id))
        wait_or_show(page, f"{sidebar.row(vault)} .rename-button", sidebar.row(vault))
        assert page.inner_text(f"#sidebar-title-{vault.id}") == "Backups"
        page.click(f"{sidebar.row(vault)} .rename-button")
        page.fill(field, "Vault <backups> & tapes")
        page.press(field, "Enter")
        page.wait_for_function(f"() => document.querySelector('#sidebar-title-{vault.id}') && document.querySelector("
                               f"'#sidebar-title-{vault.id}').textContent === 'Vault <backups> & tapes'")
        vault.refresh_from_db()
        assert (vault.title, vault.title_manual) == ("Vault <backups> & tapes", True)

        # Rename the open conversation from its heading.
        sidebar.hide()
        page.click("#title-rename-button")
        page.fill("#title-rename-input", "Offsite in Lisbon")
        page.press("#title-rename-input", "Enter")
        page.wait_for_function("() => document.querySelector('#conversation-title').textContent === 'Offsite in Lisbon' "
                               "&& !document.querySelector('#title-rename-input')")
        assert page.title() == "Offsite in Lisbon · Hermes Web"
        sidebar.show()
        assert page.inner_text(f"#sidebar-title-{plan.id}") == "Offsite in Lisbon"

        # Search: a compacted message, only the user's own, opened in context.
        page.fill("#sidebar-q", "kestrel backups")
        hit = page.wait_for_selector("#sidebar-results .message-hit", timeout=15_000)
        assert "archived: compacted" in hit.inner_text() and hit.query_selector("mark") is not None
        assert "Bob" not in page.inner_text("#sidebar-results")
        fact = Message.objects.get(conversation=vault, role="user", archived=True)
        hit.query_selector("a").click()
        page.wait_for_url(re.compile(rf".*/conversations/{vault.id}/messages/{fact.id}/.*"))
        assert "kestrel" in page.inner_text(".recall-hit").lower()
        page.goto(f"{base}/conversations/{plan.id}/")
        open_socket(page)

        # Delete with confirmation: "Keep it" takes the question back; Delete deletes.
        sidebar.show()
        page.click(f"{sidebar.row(vault)} .delete-button")
        page.wait_for_selector(f"{sidebar.row(vault)} .delete-confirm >> text=cannot be undone")
        page.click(f"{sidebar.row(vault)} .delete-cancel")
        page.wait_for_selector(f"{sidebar.row(vault)} .delete-confirm", state="detached")
        assert Conversation.objects.filter(pk=vault.pk).exists()
        page.click(f"{sidebar.row(vault)} .delete-button")
        page.click(f"{sidebar.row(vault)} .delete-confirm-button")
        page.wait_for_selector(sidebar.row(vault), state="detached")
        assert "Deleted" in page.inner_text("#sidebar-status")
        assert not Conversation.objects.filter(pk=vault.pk).exists()
        wait_for(lambda: not vault.workspace.exists(), timeout=10, what="the workspace folder to go")

        # The title made after the first reply arrives live, in the heading and in the sidebar.
        settings_store.save_group("auxiliary", {"provider": "simulator", "model": "sim-claude-200k"})
        sidebar.hide()
        page.goto(f"{base}/")
        page.click("#new-conversation")
        page.wait_for_url(re.compile(r".*/conversations/[0-9a-f-]+/$"))
        fresh = Conversation.objects.get(id=page.url.rstrip("/").rsplit("/", 1)[-1])
        open_socket(page)
        send(page, "can you help me rotate the deploy key every 30 days?")
        page.wait_for_function("() => document.querySelector('#conversation-title').textContent === "
                               "'Help rotate deploy key every'", timeout=60_000)
        page.wait_for_function(f"() => document.querySelector('#sidebar-title-{fresh.id}').textContent === "
                               "'Help rotate deploy key every'", timeout=10_000)
        assert page.title() == "Help rotate deploy key every · Hermes Web"
        page.screenshot(path=str(ARTIFACTS / f"sidebar-title-{viewport}.png"))

        # Deleting the open conversation lands on the home page, which says so.
        wait_for(lambda: not selectors.conversation_busy(fresh), timeout=30, what="the turn to end")
        sidebar.show()
        page.click(f"{sidebar.row(fresh)} .delete-button")
        page.click(f"{sidebar.row(fresh)} .delete-confirm-button")
        page.wait_for_url(re.compile(r".*/$"))
        assert "Deleted “Help rotate deploy key every”" in page.inner_text(".flash")
        assert errors == []
