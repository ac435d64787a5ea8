"""Where the context goes, in headless Chromium against the real stack at 1440 and 390 px: the
gauge's next-request figure, the split by kind and the five largest items (each a link to its
message in the transcript) are shown, and they follow a turn and a compaction live, pushed over
the socket with no reload."""
from __future__ import annotations

import json

import pytest

from sessions.models import CompressionEvent, Conversation
from sessions.services.context import message_append, session_start
from tests.browser import browser
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import sim_control
from tests.integration.test_browser_conversation import login, open_socket, send

pytestmark = [pytest.mark.integration, pytest.mark.browser]

REPORT = json.dumps([{"id": i, "service": f"api-{i % 9}", "latency_ms": 40 + i, "status": "degraded"}
                     for i in range(120)])


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/reset", {})


def history(conversation) -> int:
    """A chat with one large tool result early on (the largest item until it is compacted), then
    enough exchanges that it falls in the compacted middle."""
    session = session_start(conversation=conversation)
    for i in range(2):
        message_append(session=session, role="user", content=f"Hello {i}.")
        message_append(session=session, role="assistant", content=f"Hi {i}.")
    message_append(session=session, role="user", content="Check the service report.")
    call = {"id": "toolu_report", "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": "report.json"})}}
    message_append(session=session, role="assistant", content="", tool_calls=[call])
    tool = message_append(session=session, role="tool", content=REPORT, tool_call_id="toolu_report", name="read_file")
    message_append(session=session, role="assistant", content="Every service is degraded.")
    for i in range(30):
        message_append(session=session, role="user", content=f"Question {i} about the rollout: " + "details " * 120)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "region by region " * 40)
    return tool.id


def legend(page) -> str:
    return page.inner_text("#context-breakdown .breakdown-legend")


def largest(page) -> list[str]:
    return [li.inner_text() for li in page.locator("#context-breakdown .breakdown-largest li").all()]


@pytest.mark.parametrize(("width", "height"), [(1440, 900), (390, 844)])
def test_the_split_and_the_largest_items_follow_a_turn_and_a_compaction(live, alice, width, height):
    base = f"http://127.0.0.1:{live.web_port}"
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k",
                                               title="Where it goes")
    tool_id = history(conversation)
    ARTIFACTS.mkdir(exist_ok=True)
    with browser() as b:
        page = b.new_page(viewport={"width": width, "height": height})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(page)

        assert page.is_visible("#context-breakdown")
        assert "(estimated split)" in page.inner_text("#context-breakdown")
        for kind in ("System prompt", "Tools · built-in", "User and assistant messages", "Tool results",
                     "Reserved for the reply", "Free space"):
            assert kind in legend(page), kind
        items = largest(page)
        assert len(items) == 5 and items[0].startswith("Tool result · read_file")
        first = page.locator("#context-breakdown .breakdown-largest li a").first
        assert first.get_attribute("href") == f"#msg-{tool_id}"
        assert page.locator(f"#msg-{tool_id}").count() == 1  # the link leads to the message in the transcript
        before = int(page.get_attribute("#gauge", "data-tokens"))
        assert page.inner_text("#gauge-next").replace(",", "") == str(before)
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(ARTIFACTS / f"gauge-breakdown-{width}.png"), full_page=True)

        # A turn: the reply is larger than anything but the report, so it enters the list second.
        send(page, "Reply with 700 words about the rollout plan.")
        page.wait_for_function(f"() => Number(document.getElementById('gauge').dataset.tokens) > {before} + 500",
                               timeout=60_000)
        page.wait_for_function("() => [...document.querySelectorAll('#context-breakdown .breakdown-largest li')]"
                               ".some(li => li.innerText.includes('Reply with 700 words'))", timeout=30_000)
        items = largest(page)
        assert items[0].startswith("Tool result") and items[1].startswith("Assistant message"), items
        assert "You said" in items[1]

        # A compaction: the report is summarised away, the summary appears as its own kind.
        send(page, "/compress")
        page.wait_for_function("() => document.querySelector('#context-breakdown .breakdown-legend')"
                               ".innerText.includes('Summary')", timeout=90_000)
        assert CompressionEvent.objects.get(conversation=conversation).status == "compressed"
        assert "Tool results" not in legend(page)
        assert not any(item.startswith("Tool result") for item in largest(page))
        assert any(item.startswith("Summary") for item in largest(page))
        assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(ARTIFACTS / f"gauge-breakdown-{width}-compacted.png"), full_page=True)
        assert errors == []
