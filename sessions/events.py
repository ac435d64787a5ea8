"""Channel-layer events for a conversation: one group name, one sync broadcaster for workers.

An event is a rendered HTML fragment (htmx out-of-band swaps) plus its kind, so the page view and
the websocket push show the same markup, and a consumer only relays.
"""
from __future__ import annotations

import logging
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)

EventKind = Literal[
    "notice", "message", "delta", "tool_call", "tool_result", "gauge", "usage",
    "compression_progress", "compression_result", "turn_status", "error", "settings",
]


class ConversationEvent(TypedDict):
    type: Literal["conversation.event"]
    kind: EventKind
    html: str


SETTINGS_GROUP = "hermes.settings"


def group_name(conversation_id) -> str:
    return f"conversation.{conversation_id}"


def broadcast_settings_changed(changed=None) -> None:
    """Tell every open conversation page that settings changed; each socket re-renders its own
    gauge (the threshold marker moves without a reload or a restart)."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(SETTINGS_GROUP, {"type": "settings.changed"})
    except Exception:
        log.warning("settings broadcast failed", exc_info=True)


def broadcast(conversation_id, kind: EventKind, html: str) -> None:
    """Publish from sync code (a Celery task or a view). Never raises: live updates are best effort,
    and the page re-renders from the database on reconnect."""
    layer = get_channel_layer()
    if layer is None:
        return
    event: ConversationEvent = {"type": "conversation.event", "kind": kind, "html": html}
    try:
        async_to_sync(layer.group_send)(group_name(conversation_id), event)
    except Exception:
        log.warning("broadcast of %s to conversation %s failed", kind, conversation_id, exc_info=True)
