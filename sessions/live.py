"""What the browser is told, one function per push: a message added, a streamed delta, the gauge,
the cache panel, a turn queued, started, stopped, failed or cancelled, a compression's progress, a
new title, a notice, and the whole live state a socket receives when it (re)connects.

Services and the agent loop call these; they never render HTML themselves. Each push renders the
same fragment the page view renders (`sessions.fragments`), so a reconnect and a push agree.
"""
from __future__ import annotations

from sessions import fragments
from sessions.events import broadcast


def message_added(message, *, stream_id: str | None = None) -> None:
    """A stored message; with `stream_id` it replaces that call's streaming placeholder."""
    broadcast(message.conversation_id, "message", fragments.render_message(message, stream_id=stream_id))


def tool_result_added(message) -> None:
    broadcast(message.conversation_id, "tool_result", fragments.render_message(message))


def stream_started(conversation_id, stream_id: str) -> None:
    broadcast(conversation_id, "delta", fragments.render_stream_start(stream_id))


def stream_delta(conversation_id, stream_id: str, text: str) -> None:
    broadcast(conversation_id, "delta", fragments.render_stream_delta(stream_id, text))


def stream_text(conversation_id, stream_id: str, text: str) -> None:
    """The whole text so far (sent about once a second while a reply streams)."""
    broadcast(conversation_id, "delta", fragments.render_stream_text(stream_id, text))


def stream_removed(conversation_id, stream_id: str) -> None:
    """A placeholder that will get no message (the turn failed or was stopped before any text)."""
    broadcast(conversation_id, "delta", fragments.render_stream_removed(stream_id))


def gauge_changed(conversation) -> None:
    broadcast(conversation.id, "gauge", fragments.render_gauge(conversation))


def usage_changed(conversation) -> None:
    broadcast(conversation.id, "usage", fragments.render_cache_panel(conversation))


def turn_changed(turn) -> None:
    """The status line of the turn's conversation (what runs, what waits, the buttons)."""
    broadcast(turn.conversation_id, "turn_status", fragments.render_turn_status(turn.conversation))


def turn_queued(turn) -> None:
    broadcast(turn.conversation_id, "turn_status", fragments.render_queue(turn.conversation_id))
    turn_changed(turn)


def turn_started(turn, message=None) -> None:
    """The turn left the queue; `message`, its text, entered the history."""
    html = fragments.render_queue(turn.conversation_id)
    if message is not None:
        html += fragments.render_message(message)
    broadcast(turn.conversation_id, "message", html)
    turn_changed(turn)


def turn_cancelled(turn) -> None:
    broadcast(turn.conversation_id, "turn_status", fragments.render_queue(turn.conversation_id))
    turn_changed(turn)


def turn_failed(turn) -> None:
    """The failure where it happened, instead of the placeholder of the reply that never came."""
    html = fragments.render_stream_removed(turn.stream_id) + fragments.render_turn_entry(turn)
    broadcast(turn.conversation_id, "error", html)
    turn_changed(turn)


def turn_stopped(turn) -> None:
    broadcast(turn.conversation_id, "turn_status", fragments.render_turn_entry(turn))
    turn_changed(turn)


def transcript_changed(conversation) -> None:
    """The whole transcript again (a regenerated or edited exchange changed earlier entries)."""
    broadcast(conversation.id, "message", fragments.render_transcript(conversation))
    broadcast(conversation.id, "turn_status", fragments.render_turn_status(conversation))


def compression_progress(event) -> None:
    broadcast(event.conversation_id, "compression_progress", fragments.render_compression_event(event))
    broadcast(event.conversation_id, "turn_status", fragments.render_turn_status(event.conversation))


def compression_finished(event) -> None:
    """The event's final state; a compaction also adds its divider and moves the gauge."""
    broadcast(event.conversation_id, "compression_result", fragments.render_compression_event(event))
    if event.status == "compressed":
        broadcast(event.conversation_id, "message", fragments.render_compaction_divider(event))
        gauge_changed(event.conversation)
    broadcast(event.conversation_id, "turn_status", fragments.render_turn_status(event.conversation))


def title_changed(conversation) -> None:
    """The conversation's new title, in the page's heading and in the sidebar of every page open
    on it."""
    broadcast(conversation.id, "title", fragments.render_title_changed(conversation))


def notice(conversation_id, text: str, *, level: str = "info", kind: str | None = None, expires_on: str = "",
           expires_after: int | None = None) -> None:
    """A notice on every open page of the conversation; a new one of the same `kind` replaces the
    earlier one (see `fragments.render_notice`)."""
    broadcast(conversation_id, "notice", fragments.render_notice(text, level=level, kind=kind, expires_on=expires_on,
                                                                 expires_after=expires_after))


def live_state(conversation) -> str:
    """Everything live, re-rendered from the database (sent on every socket (re)connect)."""
    return fragments.render_live_state(conversation)
