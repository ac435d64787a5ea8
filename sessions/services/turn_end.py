"""How a turn ends when it does not end with a reply: stopped by the user, or failed.

Either way the tool calls its reply made and no result answers yet get one ("not run"), so the
next request is valid (the API refuses a tool call without its result); the turn row is closed
and every open page is told. The agent loop ends its turns here, and the stale-work sweep
(`sweep.py`) closes here a turn whose worker stopped.
"""
from __future__ import annotations

import logging

from django.utils import timezone

from sessions import live
from sessions.models import Conversation, Turn
from sessions.services.context import context_rows, message_append, session_active

log = logging.getLogger(__name__)

NOT_RUN_STOPPED = "Not run: the user stopped the turn before this tool call."
NOT_RUN_FAILED = "Not run: the turn failed before this tool call."


def tool_calls_answer_open(conversation: Conversation, text: str) -> None:
    """Give every tool call of the context's last assistant message a result (`text`)."""
    session = session_active(conversation)
    rows = list(context_rows(session).order_by("-seq")[:50])
    calls = []
    for row in rows:
        if row.role == "assistant":
            calls = [c for c in row.tool_calls or [] if isinstance(c, dict) and c.get("id")]
            break
    answered = {row.tool_call_id for row in rows if row.role == "tool"}
    for call in calls:
        if call["id"] not in answered:
            message_append(session=session, role="tool", content=text, tool_call_id=call["id"],
                           name=(call.get("function") or {}).get("name", ""))


def turn_finish(turn: Turn, status: str, error: str = "") -> None:
    """Close the turn's row with `status` (done, stopped, failed); its streamed text is dropped."""
    turn.status, turn.error, turn.finished_at, turn.partial_text = status, error, timezone.now(), None
    turn.save(update_fields=["status", "error", "finished_at", "partial_text", "iterations"])


def turn_fail(turn: Turn, message: str) -> None:
    """Close a turn as failed with `message`, the reason its page shows."""
    try:
        tool_calls_answer_open(turn.conversation, NOT_RUN_FAILED)
    except Exception:  # the failure itself must still be recorded
        log.exception("could not answer the open tool calls of turn %s", turn.id)
    turn_finish(turn, "failed", message)
    live.turn_failed(turn)


def turn_stopped(turn: Turn) -> None:
    """Close a turn the user stopped (the loop has kept the text that arrived before Stop)."""
    tool_calls_answer_open(turn.conversation, NOT_RUN_STOPPED)
    turn_finish(turn, "stopped")
    live.turn_stopped(turn)
