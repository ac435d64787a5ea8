"""Celery tasks: thin, take ids, call one service. Retries and time limits live here.

The tasks import the services they run; services never import this module: they enqueue a task
by its name (`sessions/services/enqueue.py`), so the two never form an import cycle. A task's
`name=` is the name enqueue.py sends and `CELERY_TASK_ROUTES` routes.
"""
from __future__ import annotations

from celery import shared_task

from sessions import live
from sessions.agent.loop import turn_drain
from sessions.models import CompressionEvent, Turn
from sessions.services import conversations
from sessions.services.compaction import ConversationBusy, compression_job_run
from sessions.services.sweep import sweep_once


@shared_task(name="sessions.tasks.conversation_notify")
def conversation_notify(conversation_id: str, text: str) -> None:
    """Show a notice on every open page of a conversation (operators' announcements, tests)."""
    live.notice(conversation_id, text)


@shared_task(name="sessions.tasks.agent_turn_run", bind=True, max_retries=None, acks_late=True)
def agent_turn_run(self, turn_id: int) -> None:
    """Run the conversation's queued turns in order; another worker holding the lease drains them,
    so a busy conversation retries shortly instead of interleaving two turns."""
    conversation_id = Turn.objects.filter(id=turn_id).values_list("conversation_id", flat=True).first()
    if conversation_id is None:
        return
    if not turn_drain(conversation_id=conversation_id):
        if Turn.objects.filter(id=turn_id, status="queued").exists():
            raise self.retry(countdown=1)


@shared_task(name="sessions.tasks.compression_run", bind=True, max_retries=900, acks_late=True, soft_time_limit=900)
def compression_run(self, event_id: int, holder: str, force: bool = False) -> dict:
    """A queued compression (manual, hygiene, admin). Waits, by retrying, while a turn is running."""
    if not CompressionEvent.objects.filter(id=event_id).exists():
        return {"event": event_id, "status": "missing"}
    try:
        outcome = compression_job_run(event_id=event_id, holder=holder, force=force)
    except ConversationBusy:
        raise self.retry(countdown=1) from None
    return {"event": outcome.event.id, "status": outcome.event.status}


@shared_task(name="sessions.tasks.conversation_title_make", soft_time_limit=300)
def conversation_title_make(conversation_id: str) -> str | None:
    """The title of a conversation after its first exchange, by the auxiliary model (queue
    `compression`, like the summariser's calls). Best effort: no retries."""
    return conversations.conversation_title_make(conversation_id=conversation_id)


@shared_task(name="sessions.tasks.stale_sweep")
def stale_sweep() -> dict:
    """One pass of the stale-work sweep (every worker also runs one every HERMES_SWEEP_INTERVAL
    seconds on its own; this is for operators and schedulers)."""
    return sweep_once().as_dict()
