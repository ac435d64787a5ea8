"""The chat as the page shows it: the visible messages with the turns merged in where they
happened, the queue of turns waiting to start, and the state the status line and its buttons show.

- A failed or stopped turn is an entry after the messages written before it ended (by time:
  turns run one at a time, so nothing of a later turn is older than an earlier turn's end).
- The running turn's reply so far (`Turn.partial_text`) is the last entry while it streams.
- Queued turns are not in the transcript: they are listed below it until they start, and their
  text enters the history only then. Cancelled ones never happened and are not shown.
- Assistant text is sanitised markdown (`sessions.markdown`); everything else is escaped by the
  templates.

Reads in a fixed number of queries: the messages, the dividers' events (when there are
dividers) and one query for the turns.
"""
from __future__ import annotations

from django.db.models import Q

from sessions import selectors
from sessions.markdown import render_markdown
from sessions.models import CompressionEvent, Conversation, Message, Turn

SHOWN = ("queued", "running", "failed", "stopped")
_NOT_LOOKED_UP = object()


def turns_shown(conversation: Conversation) -> list[Turn]:
    """Every turn the chat shows (queued, running, failed, stopped) and the latest, oldest first."""
    latest = Turn.objects.filter(conversation_id=conversation.id).order_by("-id").values("id")[:1]
    return list(Turn.objects.filter(conversation_id=conversation.id)
                .filter(Q(status__in=SHOWN) | Q(id__in=latest)).select_related("user_message").order_by("id"))


def message_entry(message: Message, event=_NOT_LOOKED_UP) -> dict:
    """One message as an entry; assistant text as sanitised markdown."""
    entry = selectors.transcript_entry(message) if event is _NOT_LOOKED_UP else selectors.transcript_entry(message, event)
    entry.update(kind="message", stopped=message.stopped, replaced=message.replaced, html="")
    if message.role == "assistant" and entry["text"]:
        entry["html"] = render_markdown(entry["text"])
    return entry


def turn_entry(turn: Turn) -> dict:
    return {"kind": "turn", "id": turn.id, "turn": turn, "status": turn.status}


def stream_entry(turn: Turn) -> dict:
    return {"kind": "stream", "id": turn.id, "stream_id": turn.stream_id, "text": turn.partial_text or ""}


def transcript(conversation: Conversation, turns: list[Turn] | None = None, known_events=None) -> list[dict]:
    """Visible messages in order (the newest `selectors.TRANSCRIPT_LIMIT`), failed and stopped
    turns where they ended, and the running turn's reply so far. The dividers' events are read
    in one query, less those in ``known_events`` (the event feed's, on a socket connect)."""
    turns = turns_shown(conversation) if turns is None else turns
    rows = list(conversation.messages.filter(visible=True).order_by("-id")[:selectors.TRANSCRIPT_LIMIT])
    rows.reverse()
    events = {e.summary_message_id: e for e in known_events or () if e.summary_message_id}
    missing = [m.id for m in rows if m.is_summary and m.id not in events]
    if missing:
        events.update((e.summary_message_id, e) for e in CompressionEvent.objects.filter(summary_message_id__in=missing))
    ended = sorted((t for t in turns if t.status in ("failed", "stopped") and t.finished_at), key=lambda t: t.finished_at)
    if len(rows) == selectors.TRANSCRIPT_LIMIT:  # older turns belong to messages not shown
        ended = [t for t in ended if t.finished_at >= rows[0].created_at]
    entries: list[dict] = []
    for message in rows:
        while ended and ended[0].finished_at < message.created_at:
            entries.append(turn_entry(ended.pop(0)))
        entries.append(message_entry(message, events.get(message.id)))
    entries.extend(turn_entry(t) for t in ended)
    running = next((t for t in turns if t.status == "running"), None)
    if running is not None and running.partial_text is not None:
        entries.append(stream_entry(running))
    return entries


def queue(turns: list[Turn]) -> list[Turn]:
    return [t for t in turns if t.status == "queued"]


def state(conversation: Conversation, turns: list[Turn], events=None) -> dict:
    """What the status line says and which buttons it offers.

    Stop while a turn runs; Retry when the latest turn failed; Regenerate and Edit when it ended
    otherwise; none of them while turns are waiting. `events` (newest first) give the running
    compression, if any."""
    running = next((t for t in turns if t.status == "running"), None)
    queued = queue(turns)
    latest = turns[-1] if turns else None
    idle = running is None and not queued
    compressing = next((e for e in events or () if e.status in ("queued", "running")), None)
    last_text = ""
    if latest is not None and latest.user_message is not None and isinstance(latest.user_message.content, str):
        last_text = latest.user_message.content
    return {
        "conversation_id": conversation.id, "running": running, "queued": queued, "latest": latest,
        "compressing": compressing, "stopping": bool(running and running.stop_requested),
        "can_retry": idle and latest is not None and latest.status == "failed",
        "can_regenerate": idle and latest is not None and latest.status in ("done", "stopped"),
        "last_text": last_text,
        "status": running.status if running else ("queued" if queued else (latest.status if latest else "idle")),
    }
