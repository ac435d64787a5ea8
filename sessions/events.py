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


def group_name(conversation_id) -> str:
    return f"conversation.{conversation_id}"


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
