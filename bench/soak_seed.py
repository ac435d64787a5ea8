"""The tools profile's database side, run inside ``manage.py shell`` of the soak's throwaway data
folder (bench/soak_tools.py): the users with their login sessions and limits, the lcm context
engine, the MCP server, the conversations with their workspace files; then waiting for the worker
to connect the MCP server, and the counts read back at the end.

Each function prints one line ``SOAK-<WHAT> <json>`` for the benchmark to read."""
from __future__ import annotations

import json
import sys
import time
from importlib import import_module
from pathlib import Path

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.db import transaction
from django.db.models import Count, Sum

from bench.soak_plan import MCP_INCLUDE, MCP_SERVER, NOTES_FILE, notes_text
from compression import settings_store
from compression.models import MCPServer
from sessions.models import CompressionEvent, Conversation, Message
from sessions.models_limits import UsageDay, UserLimits
from sessions.services.context import session_start
from sessions.services.limits import limits_save

# The SDK-built stdio server the MCP integration tests use.
PROBE = Path(__file__).resolve().parents[1] / "tests" / "integration" / "mcp_test_server.py"


def seed(plan: dict) -> None:
    """``plan`` is ``bench.soak_plan.seed_plan()``."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    users, conversations = [], []
    with transaction.atomic():
        for spec in plan["users"]:
            user = get_user_model().objects.create_user(spec["name"])  # unusable password: fast
            session = store()
            session[SESSION_KEY] = str(user.pk)
            session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
            session[HASH_SESSION_KEY] = user.get_session_auth_hash()
            session.create()
            users.append({"id": user.pk, "name": user.username, "cookie": session.session_key,
                          "limits": spec["limits"]})
            if spec["limits"]:
                limits_save(row=UserLimits(user=user, **spec["limits"]), source="code")
        for c in plan["conversations"]:
            conversation = Conversation.objects.create(owner_id=users[c["user"]]["id"], provider="simulator",
                                                       model=plan["model"], title=f"soak {c['index']}")
            session_start(conversation=conversation)
            workspace = Path(conversation.workspace)
            workspace.mkdir(parents=True, exist_ok=True)
            (workspace / NOTES_FILE).write_text(notes_text(c["index"]))
            conversations.append({"id": str(conversation.id), "user": c["user"], "index": c["index"]})
    settings_store.save_group("context", {"engine": plan["engine"]}, source="code")
    MCPServer.objects.create(name=MCP_SERVER, command=sys.executable, args=[str(PROBE), "stdio"],
                             tools_include=list(MCP_INCLUDE))
    print("SOAK-SEED " + json.dumps({"users": users, "conversations": conversations}))


def wait_mcp(timeout: float = 90.0) -> None:
    """Until the worker has connected the MCP server and listed its tools."""
    deadline = time.monotonic() + timeout
    server = MCPServer.objects.get(name=MCP_SERVER)
    while not (server.state == "connected" and server.tools):
        if time.monotonic() > deadline:
            raise SystemExit(f"the MCP server did not connect within {timeout:.0f} s: {server.state} "
                             f"{server.last_error!r}")
        time.sleep(0.5)
        server.refresh_from_db()
    print("SOAK-MCP " + json.dumps({"state": server.state, "tools": sorted(t["name"] for t in server.tools)}))


def counts() -> None:
    """The tool calls by name (and how many came back as errors), the compression events by
    status and trigger, and each user's accepted messages."""
    tools: dict[str, dict[str, int]] = {}
    for name, content in Message.objects.filter(role="tool", visible=True).values_list("name", "content"):
        entry = tools.setdefault(name or "?", {"calls": 0, "errors": 0})
        entry["calls"] += 1
        text = content if isinstance(content, str) else json.dumps(content)
        if text.startswith("Error") or text.startswith('{"error"'):
            entry["errors"] += 1
    events = [{"status": row["status"], "trigger": row["trigger"], "n": row["n"]}
              for row in CompressionEvent.objects.values("status", "trigger").annotate(n=Count("id"))]
    accepted = {row["user__username"]: row["n"] for row in
                UsageDay.objects.values("user__username").annotate(n=Sum("messages"))}
    print("SOAK-COUNTS " + json.dumps({"tools": tools, "compressions": events, "accepted": accepted}))
