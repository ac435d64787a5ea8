"""MCP from a browser: staff add `mcp-server-time` in the admin, a user asks for the time in
Lisbon through the simulator's `call tool` trigger and reads the quoted answer, switches the server
off for the conversation, and the staff dashboard shows the server connected."""
from __future__ import annotations

import re

import pytest

from compression.models import MCPServer
from tests.browser import browser
from tests.conftest import user
from tests.integration.conftest import ARTIFACTS
from tests.integration.helpers import wait_for
from tests.integration.test_browser_conversation import login
from tests.integration.test_chat_browser import PHONE, Chat

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]

ASK = 'call tool mcp_time_get_current_time with {"timezone": "Europe/Lisbon"}'


def test_staff_add_the_time_server_and_a_user_gets_the_time_in_lisbon(live, alice, django_user_model):
    user(django_user_model, "root", "root-password-1", is_staff=True, is_superuser=True)
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        staff = b.new_context(viewport={"width": 1440, "height": 900}).new_page()
        errors: list[str] = []
        staff.on("pageerror", lambda exc: errors.append(str(exc)))
        login(staff, base, "root", "root-password-1")
        staff.goto(base + "/admin/compression/mcpserver/add/")
        staff.fill("#id_name", "time")
        staff.fill("#id_command", "mcp-server-time")
        staff.fill("#id_env", "TZ_HINT=not-a-secret-but-write-only")
        staff.click("input[name=_save]")
        staff.wait_for_url(re.compile(r".*/admin/compression/mcpserver/$"))
        assert "not-a-secret-but-write-only" not in staff.content()
        server = MCPServer.objects.get(name="time")
        wait_for(lambda: MCPServer.objects.filter(id=server.id, state="connected").exists(), 60,
                 what="the worker to connect to the time server")

        c = Chat(b, live, alice, "alice-password-1")
        page = c.page
        switch = page.locator("#mcp-switch")
        assert switch.count() == 1 and "MCP servers (1)" in switch.locator("summary").inner_text()
        c.send(ASK)
        answer = page.locator("#transcript > [data-role=assistant] .text", has_text="returned:")
        answer.wait_for(timeout=60_000)
        text = answer.inner_text()
        assert text.startswith("tool mcp_time_get_current_time returned:") and "Europe/Lisbon" in text
        assert re.search(r'"datetime": "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d', text), text
        # The schemas show as their own part of the context split.
        assert page.locator("#gauge", has_text="MCP time").count() == 1
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "mcp-time-1440.png"))

        # Off for this conversation: the page says so, and the model is no longer offered the tool.
        page.click("#mcp-switch summary")
        page.uncheck("#mcp-switch input[value=time]")
        page.click("#mcp-switch-button")
        page.locator("#notices .notice", has_text="time off").wait_for()
        assert "prompt cache goes cold" in page.locator("#notices").inner_text()
        c.send(ASK)
        page.locator("#transcript > [data-role=assistant] .text",
                     has_text="no tool named mcp_time_get_current_time is offered").wait_for(timeout=60_000)
        page.set_viewport_size(PHONE)
        page.screenshot(path=str(ARTIFACTS / "mcp-switch-390.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")

        staff.goto(base + "/staff/")
        row = staff.locator("#mcp-servers tr[data-server=time]")
        assert row.get_attribute("data-state") == "connected"
        assert "connected" in row.locator(".mcp-state").inner_text()
        assert errors == [] and c.errors == []
