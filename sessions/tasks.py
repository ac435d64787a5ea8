"""Celery tasks: thin, take ids, call one service."""
from __future__ import annotations

from celery import shared_task

from sessions import fragments
from sessions.events import broadcast


@shared_task(name="sessions.tasks.conversation_notify")
def conversation_notify(conversation_id: str, text: str) -> None:
    """Show a notice on every open page of a conversation (operators' announcements, tests)."""
    broadcast(conversation_id, "notice", fragments.render_notice(text))
