"""The MCP servers a conversation is offered, and the user's switch to turn some off (SPEC §13.6).

A server's tools are offered when it is enabled, has listed its tools to a worker, is not down,
and the conversation has not switched it off. The tools come from the server's row (what the
workers recorded), so the web process counts the same schemas the worker sends without
connecting to anything: one query.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from compression.models import MCPServer
from sessions.agent.tools.mcp import offer
from sessions.models import Conversation

SCHEMA_SHARE_WARNING = 0.10  # enabled MCP schemas above this share of the window: the page warns


class SwitchRejected(Exception):
    """The user's switch cannot be applied; the message says why."""


@dataclass(frozen=True)
class OfferedServer:
    id: int
    name: str
    schemas: list[dict]
    routes: dict[str, str] = field(default_factory=dict)  # offered name -> the server's own tool name


def _offered(server: MCPServer) -> OfferedServer:
    kept = offer.selected(server.tools or [], server.tools_include, server.tools_exclude)
    return OfferedServer(server.id, server.name, offer.schemas(server.name, kept),
                         {offer.tool_name(server.name, str(t["name"])): str(t["name"]) for t in kept})


def usable(server: MCPServer) -> bool:
    down = server.state == "down" and server.state_generation == server.generation
    return server.enabled and not down and bool(server.tools)


def servers_offered(conversation: Conversation | None = None, *, servers=None) -> list[OfferedServer]:
    """The servers whose tools go with the conversation's next request (all usable ones without
    a conversation), in name order."""
    rows = list(MCPServer.objects.filter(enabled=True)) if servers is None else servers
    off = set(conversation.mcp_off or []) if conversation is not None else set()
    return [_offered(s) for s in rows if usable(s) and s.name not in off]


def tool_route(name: str, conversation: Conversation) -> tuple[MCPServer, str] | None:
    """The server row and the server's own tool name behind an offered ``mcp_…`` name (None when
    the conversation is not offered such a tool now)."""
    if not name.startswith(offer.PREFIX):
        return None
    rows = list(MCPServer.objects.filter(enabled=True))
    for offered in servers_offered(conversation, servers=rows):
        if name in offered.routes:
            return next(s for s in rows if s.id == offered.id), offered.routes[name]
    return None


def conversation_servers(conversation: Conversation) -> list[dict]:
    """The enabled servers as the conversation page lists them: name, on for this conversation,
    its state and number of offered tools."""
    off = set(conversation.mcp_off or [])
    out = []
    for server in MCPServer.objects.filter(enabled=True):
        offered = _offered(server)
        out.append({"name": server.name, "on": server.name not in off, "usable": usable(server),
                    "state": server.state, "tools": len(offered.schemas)})
    return out


def conversation_switch(*, conversation: Conversation, on: list[str]) -> tuple[list[str], list[str]]:
    """Keep only ``on`` of the enabled servers on for this conversation, from its next request.
    Returns (switched off, switched on) relative to before."""
    names = set(MCPServer.objects.filter(enabled=True).values_list("name", flat=True))
    unknown = sorted(set(on) - names)
    if unknown:
        raise SwitchRejected(f"No MCP server named {', '.join(unknown)} is enabled.")
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        before = set(conversation.mcp_off or [])
        # Servers not enabled now keep their switch: re-enabled later, they stay as the user left them.
        after = sorted((before - names) | (names - set(on)))
        conversation.mcp_off = after
        conversation.save(update_fields=["mcp_off"])
    return sorted(set(after) - before), sorted(before - set(after))
