"""MCP servers as a conversation sees them: offered from what the workers recorded (enabled, listed,
not down, filtered by include/exclude), switched off per conversation from its page, counted in the
gauge's split with a warning above 10 % of the window, and listed on the staff dashboard."""
from __future__ import annotations

import pytest
from django.urls import reverse

from compression.models import MCPServer
from sessions import presenters
from sessions.models import Conversation
from sessions.services import pressure, runtime
from sessions.services.context import message_append, session_active, session_start
from sessions.services.mcp import servers_offered, tool_route

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def listed(*names: str, words: int = 5) -> list[dict]:
    return [{"name": n, "description": " ".join(["describes"] * words),
             "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}}} for n in names]


def server(name: str, *tools: str, words: int = 5, **fields) -> MCPServer:
    fields.setdefault("state", "connected")
    return MCPServer.objects.create(name=name, command="true", tools=listed(*tools, words=words), **fields)


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, model="sim-claude-200k")
    session_start(conversation=c)
    return c


def offered_names(conversation=None) -> set[str]:
    return {t["name"] for s in servers_offered(conversation) for t in s.schemas}


def test_only_enabled_listed_and_not_down_servers_are_offered_with_their_filters(conversation):
    server("time", "get_current_time", "convert_time", tools_exclude=["convert_time"])
    server("git", "git_status", "git_log", "git_commit", tools_include=["git_status", "git_log"])
    server("off", "a", enabled=False)
    server("never", state="failing")  # never listed its tools
    server("dead", "b", state="down", failures=3)
    assert offered_names(conversation) == {"mcp_time_get_current_time", "mcp_git_git_status", "mcp_git_git_log"}
    # A reload (a new generation) gives a down server its chance again.
    MCPServer.objects.filter(name="dead").update(generation=1)
    assert "mcp_dead_b" in offered_names(conversation)


def test_a_route_leads_to_the_server_and_its_own_tool_name(conversation):
    s = server("my-server", "do.it")
    assert offered_names(conversation) == {"mcp_my-server_do_it"}
    row, tool = tool_route("mcp_my-server_do_it", conversation)
    assert row.id == s.id and tool == "do.it"
    assert tool_route("mcp_my-server_other", conversation) is None
    assert tool_route("read_file", conversation) is None


def test_the_switch_turns_a_server_off_for_one_conversation_only(client, alice, conversation):
    server("time", "get_current_time")
    server("git", "git_status")
    other = Conversation.objects.create(owner=alice)
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert 'id="mcp-switch"' in page and 'value="time" checked' in page and 'value="git" checked' in page
    response = client.post(reverse("conversation-mcp", args=[conversation.id]), {"on": ["time"]}, **HTMX)
    assert response.status_code == 200
    text = response.content.decode()
    assert "git off" in text and "prompt cache goes cold" in text and 'value="git" checked' not in text
    conversation.refresh_from_db()
    assert conversation.mcp_off == ["git"]
    assert offered_names(conversation) == {"mcp_time_get_current_time"}
    assert offered_names(Conversation.objects.get(id=other.id)) == {"mcp_time_get_current_time", "mcp_git_git_status"}
    kinds = {p["kind"] for p in presenters.gauge(conversation)["breakdown"]["parts"]}
    assert "tools:mcp:time" in kinds and "tools:mcp:git" not in kinds
    # On again.
    client.post(reverse("conversation-mcp", args=[conversation.id]), {"on": ["time", "git"]}, **HTMX)
    conversation.refresh_from_db()
    assert conversation.mcp_off == []


def test_the_switch_is_refused_for_an_unknown_server_and_for_someone_elses_conversation(client, alice, bob, conversation):
    server("time", "get_current_time")
    client.force_login(alice)
    response = client.post(reverse("conversation-mcp", args=[conversation.id]), {"on": ["time", "nope"]}, **HTMX)
    assert response.status_code == 422 and "No MCP server named nope" in response.content.decode()
    conversation.refresh_from_db()
    assert conversation.mcp_off == []
    client.force_login(bob)
    assert client.post(reverse("conversation-mcp", args=[conversation.id]), {"on": []}).status_code == 404
    conversation.refresh_from_db()
    assert conversation.mcp_off == []


def test_the_switch_needs_a_csrf_token(alice, conversation):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    server("time", "get_current_time")
    assert client.post(reverse("conversation-mcp", args=[conversation.id]), {"on": []}).status_code == 403


def test_a_conversation_page_without_servers_shows_no_switch(client, alice, conversation):
    client.force_login(alice)
    assert 'id="mcp-switch"' not in client.get(reverse("conversation", args=[conversation.id])).content.decode()


def test_schemas_over_a_tenth_of_the_window_warn_and_count_in_the_projection(conversation):
    cfg = runtime.current_config()
    message_append(session=session_active(conversation), role="user", content="hello there")
    before = presenters.gauge(conversation, cfg=cfg)
    assert before["mcp_warning"] == "" and before["mcp_tokens"] == 0
    server("huge", *(f"tool_{i}" for i in range(120)), words=150)  # ~ 20K+ tokens of schemas on a 200K window
    g = presenters.gauge(conversation, cfg=cfg)
    assert g["mcp_tokens"] > 20_000 and "Switch off the servers" in g["mcp_warning"]
    part = next(p for p in g["breakdown"]["parts"] if p["kind"] == "tools:mcp:huge")
    assert part["label"] == "Tools · MCP huge" and part["tokens"] > 20_000
    assert g["tokens"] - before["tokens"] >= g["mcp_tokens"] * 0.99
    # The list rows count the same tools as the gauge, with the server on and off.
    session = session_active(conversation)
    assert pressure.rows_projection([conversation], {conversation.id: session}, cfg)[conversation.id][0].tokens == g["tokens"]
    conversation.mcp_off = ["huge"]
    conversation.save()
    off = presenters.gauge(conversation, cfg=cfg)
    assert off["mcp_warning"] == "" and off["tokens"] == before["tokens"]
    assert pressure.rows_projection([conversation], {conversation.id: session}, cfg)[conversation.id][0].tokens == off["tokens"]


def test_the_staff_dashboard_lists_each_server_with_its_state(admin_client):
    server("time", "get_current_time", "convert_time", last_latency_ms=12.5)
    server("broken", state="down", failures=3, last_error="could not start: [Errno 2] No such file")
    html = admin_client.get("/staff/").content.decode()
    assert 'data-server="time" data-state="connected"' in html and "13 ms" in html
    assert 'data-server="broken" data-state="down"' in html and "could not start" in html
