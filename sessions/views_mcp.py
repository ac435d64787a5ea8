"""The user's switch of MCP servers for one conversation (a checkbox per enabled server). Only
staff configure servers (in the admin); a user can only switch them off and on again here."""
from __future__ import annotations

from django.urls import path
from django.views.decorators.http import require_POST

from sessions import fragments, live
from sessions.services import mcp
from sessions.views import _own, _reply


def switch_notice(off: list[str], on: list[str]) -> str:
    if not off and not on:
        return "Nothing changed: the same MCP servers stay on for this conversation."
    parts = [f"{', '.join(on)} on" if on else "", f"{', '.join(off)} off" if off else ""]
    return (f"MCP servers for this conversation: {'; '.join(p for p in parts if p)}. This applies from the next "
            "request; the tools offered change, so the prompt cache goes cold once (the next request is "
            "written to the cache again).")


@require_POST
def conversation_mcp(request, conversation_id):
    conversation = _own(request, conversation_id)
    try:
        off, on = mcp.conversation_switch(conversation=conversation, on=request.POST.getlist("on"))
    except mcp.SwitchRejected as exc:
        return _reply(request, conversation, str(exc), level="error")
    conversation.refresh_from_db()
    if off or on:
        live.gauge_changed(conversation)  # the schemas' share of the window changed
    return _reply(request, conversation, switch_notice(off, on),
                  html=(fragments.render_to_notice(switch_notice(off, on)) + fragments.render_mcp_switch(conversation)
                        if request.htmx else ""))


urlpatterns = [
    path("conversations/<uuid:conversation_id>/mcp", conversation_mcp, name="conversation-mcp"),
]
