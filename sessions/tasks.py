"""Celery tasks: thin, take ids, call one service. Retries and time limits live here."""
from __future__ import annotations

from celery import shared_task

from sessions import fragments
from sessions.events import broadcast


@shared_task(name="sessions.tasks.conversation_notify")
def conversation_notify(conversation_id: str, text: str) -> None:
    """Show a notice on every open page of a conversation (operators' announcements, tests)."""
    broadcast(conversation_id, "notice", fragments.render_notice(text))


@shared_task(name="sessions.tasks.agent_turn_run", bind=True, max_retries=None, acks_late=True)
def agent_turn_run(self, turn_id: int) -> None:
    """Run the conversation's queued turns in order; another worker holding the lease drains them,
    so a busy conversation retries shortly instead of interleaving two turns."""
    from sessions.models import Turn
    from sessions.services.turns import turn_drain

    conversation_id = Turn.objects.filter(id=turn_id).values_list("conversation_id", flat=True).first()
    if conversation_id is None:
        return
    if not turn_drain(conversation_id=conversation_id):
        if Turn.objects.filter(id=turn_id, status="queued").exists():
            raise self.retry(countdown=1)


@shared_task(name="sessions.tasks.compression_run", bind=True, max_retries=900, acks_late=True, soft_time_limit=900)
def compression_run(self, event_id: int, holder: str, force: bool = False) -> dict:
    """A queued compression (manual, hygiene, admin). Waits, by retrying, while a turn is running."""
    from sessions.models import CompressionEvent
    from sessions.services.compaction import ConversationBusy, compress_conversation

    event = CompressionEvent.objects.filter(id=event_id).values("conversation_id", "trigger", "focus_topic").first()
    if event is None:
        return {"event": event_id, "status": "missing"}
    try:
        outcome = compress_conversation(conversation_id=event["conversation_id"], trigger=event["trigger"],
                                        focus_topic=event["focus_topic"] or None, force=force,
                                        event_id=event_id, holder=holder)
    except ConversationBusy:
        raise self.retry(countdown=1) from None
    return {"event": outcome.event.id, "status": outcome.event.status}
