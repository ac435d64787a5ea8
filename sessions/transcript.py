"""The chat as the page shows it: the visible messages with the turns merged in where they
happened, the queue of turns waiting to start, and the state the status line and its buttons show.

- A failed or stopped turn is an entry after the messages written before it ended (by time:
  turns run one at a time, so nothing of a later turn is older than an earlier turn's end).
- The running turn's reply so far (`Turn.partial_text`) is the last entry while it streams.
- Queued turns are not in the transcript: they are listed below it until they start, and their
  text enters the history only then. Cancelled ones never happened and are not shown.
- Assistant text is sanitised markdown (`sessions.markdown`); everything else is escaped by the
  templates.
- A user message with attachments (its content a list of parts) shows the text as typed, then a
  thumbnail that opens each image and a link to each other file, from the `Attachment` rows: the
  original files, whatever a compaction later did to the model's copy.

Reads in a fixed number of queries: the messages, the dividers' events (when there are
dividers), the attachments (when a message has some) and one query for the turns.
"""
from __future__ import annotations

import re

from django.db.models import Q

from sessions import selectors
from sessions.markdown import render_markdown
from sessions.models import Attachment, CompressionEvent, Conversation, Message, Turn
from sessions.services.attachments import human_size

SHOWN = ("queued", "running", "failed", "stopped")
_NOT_LOOKED_UP = object()
# The lines naming a message's attachments at the end of its text (for the model; the page shows
# the attachments themselves).
_ATTACHED_LINES = re.compile(r"(?:\n*\[attached[^\n]*\])+\s*\Z")


def turns_shown(conversation: Conversation) -> list[Turn]:
    """Every turn the chat shows (queued, running, failed, stopped) and the latest, oldest first."""
    latest = Turn.objects.filter(conversation_id=conversation.id).order_by("-id").values("id")[:1]
    return list(Turn.objects.filter(conversation_id=conversation.id)
                .filter(Q(status__in=SHOWN) | Q(id__in=latest)).select_related("user_message__session")
                .order_by("id"))


def typed_text(text: str) -> str:
    """A message's text without the lines naming its attachments."""
    return _ATTACHED_LINES.sub("", text or "")


def attachments_of_messages(message_ids: list[int]) -> dict[int, list[Attachment]]:
    """The attachments of these messages, by message id, in one query."""
    out: dict[int, list[Attachment]] = {}
    if message_ids:
        for a in Attachment.objects.filter(message_id__in=message_ids).order_by("id"):
            out.setdefault(a.message_id, []).append(a)
    return out


def _has_attachments(message: Message) -> bool:
    return message.role == "user" and isinstance(message.content, list)


def _attachment_items(rows) -> list[dict]:
    return [{"id": a.id, "kind": a.kind, "name": a.name, "size": human_size(a.size), "pages": a.pages,
             "has_text": a.has_text, "width": a.width, "height": a.height} for a in rows]


def message_entry(message: Message, event=_NOT_LOOKED_UP, attachments=_NOT_LOOKED_UP) -> dict:
    """One message as an entry; assistant text as sanitised markdown; a user message's
    attachments (looked up unless given) as items for thumbnails and links."""
    entry = selectors.transcript_entry(message) if event is _NOT_LOOKED_UP else selectors.transcript_entry(message, event)
    entry.update(kind="message", stopped=message.stopped, replaced=message.replaced, html="", attachments=[])
    if message.role == "assistant" and entry["text"]:
        entry["html"] = render_markdown(entry["text"])
    if _has_attachments(message):
        text = next((p.get("text") or "" for p in message.content if isinstance(p, dict) and p.get("type") == "text"), "")
        entry["text"] = typed_text(text)
        if attachments is _NOT_LOOKED_UP:
            attachments = attachments_of_messages([message.id]).get(message.id, [])
        entry["attachments"] = _attachment_items(attachments or [])
    return entry


def compacted_away(turn: Turn | None) -> bool:
    """Whether a compaction summarised the message ``turn`` answered: the services refuse to answer
    it again (Regenerate, Retry, Edit), so none of them is offered for it."""
    message = turn.user_message if turn is not None else None
    return message is not None and (message.archived or message.session.ended_at is not None)


def turn_entry(turn: Turn) -> dict:
    return {"kind": "turn", "id": turn.id, "turn": turn, "status": turn.status, "retryable": not compacted_away(turn)}


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
    files = attachments_of_messages([m.id for m in rows if _has_attachments(m)])
    ended = sorted((t for t in turns if t.status in ("failed", "stopped") and t.finished_at), key=lambda t: t.finished_at)
    if len(rows) == selectors.TRANSCRIPT_LIMIT:  # older turns belong to messages not shown
        ended = [t for t in ended if t.finished_at >= rows[0].created_at]
    entries: list[dict] = []
    for message in rows:
        while ended and ended[0].finished_at < message.created_at:
            entries.append(turn_entry(ended.pop(0)))
        entries.append(message_entry(message, events.get(message.id), files.get(message.id, [])))
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
    otherwise; none of them while turns are waiting, nor once a compaction summarised the message
    the latest turn answered. `events` (newest first) give the running
    compression, if any."""
    running = next((t for t in turns if t.status == "running"), None)
    queued = queue(turns)
    latest = turns[-1] if turns else None
    idle = running is None and not queued
    compressing = next((e for e in events or () if e.status in ("queued", "running")), None)
    last_text = ""
    if latest is not None and latest.user_message is not None and isinstance(latest.user_message.content, str):
        last_text = latest.user_message.content
    compacted = compacted_away(latest)
    return {
        "conversation_id": conversation.id, "running": running, "queued": queued, "latest": latest,
        "compressing": compressing, "stopping": bool(running and running.stop_requested),
        "can_retry": idle and latest is not None and latest.status == "failed" and not compacted,
        "can_regenerate": idle and latest is not None and latest.status in ("done", "stopped") and not compacted,
        "last_text": last_text,
        "status": running.status if running else ("queued" if queued else (latest.status if latest else "idle")),
    }
