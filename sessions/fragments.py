"""One render function per fragment, used by the page views and by the websocket pushes, so a
push and a reconnect produce the same markup. Fragments pushed over the socket carry
`hx-swap-oob` (the htmx websocket extension swaps them by id)."""
from __future__ import annotations

from django.template.loader import render_to_string

from sessions import selectors


def render_notice(text: str, *, level: str = "info") -> str:
    return render_to_string("sessions/_notice.html", {"text": text, "level": level, "oob": True})


def render_to_notice(text: str, *, level: str = "info") -> str:
    """A notice as the direct answer to an htmx request (swapped by the request, not out of band)."""
    return render_to_string("sessions/_notice.html", {"text": text, "level": level, "oob": False, "inner": True})


def render_message(message, *, stream_id: str | None = None, oob: bool = True) -> str:
    """A transcript entry. With `stream_id`, it replaces the streaming placeholder of that call."""
    ctx = {"m": message, "entry": selectors.transcript_entry(message), "oob": oob, "stream_id": stream_id}
    return render_to_string("sessions/_message.html", ctx)


def render_stream_start(stream_id: str) -> str:
    return render_to_string("sessions/_stream_start.html", {"stream_id": stream_id})


def render_stream_delta(stream_id: str, text: str) -> str:
    return render_to_string("sessions/_stream_delta.html", {"stream_id": stream_id, "text": text})


def render_gauge(conversation, *, oob: bool = True) -> str:
    return render_to_string("sessions/_gauge.html", {"g": selectors.gauge(conversation), "oob": oob})


def render_cache_panel(conversation, *, oob: bool = True) -> str:
    return render_to_string("sessions/_cache_panel.html", {"c": selectors.cache_metrics(conversation), "oob": oob})


def render_event_feed(conversation, *, oob: bool = True) -> str:
    return render_to_string("sessions/_event_feed.html", {"events": selectors.compression_events(conversation), "oob": oob})


def render_compression_event(event) -> str:
    """A change to one compression event re-renders the (short) feed it belongs to."""
    return render_event_feed(event.conversation)


def render_compaction_divider(event) -> str:
    message = event.summary_message
    if message is None:
        return ""
    return render_message(message)


def render_turn_status(turn, *, oob: bool = True) -> str:
    return render_to_string("sessions/_turn_status.html", {"turn": turn, "oob": oob})


def render_turn_error(turn) -> str:
    return render_notice(turn.error, level="error")


def render_transcript(conversation, *, oob: bool = True) -> str:
    return render_to_string("sessions/_transcript.html", {"entries": selectors.transcript(conversation), "oob": oob})


def render_live_state(conversation) -> str:
    """Everything live, re-rendered from the database (sent on every socket (re)connect)."""
    parts = [render_gauge(conversation), render_cache_panel(conversation),
             render_event_feed(conversation), render_transcript(conversation)]
    turn = selectors.turn_latest(conversation)
    if turn is not None:
        parts.append(render_turn_status(turn))
    return "\n".join(parts)
