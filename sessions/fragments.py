"""One render function per fragment, used by the page views and by the websocket pushes, so a
push and a reconnect produce the same markup. Fragments pushed over the socket carry
`hx-swap-oob` (the htmx websocket extension swaps them by id)."""
from __future__ import annotations

from django.template.loader import render_to_string

from sessions import presenters, selectors, transcript


def render_notice(text: str, *, level: str = "info") -> str:
    return render_to_string("sessions/_notice.html", {"text": text, "level": level, "oob": True})


def render_to_notice(text: str, *, level: str = "info") -> str:
    """A notice as the direct answer to an htmx request (swapped by the request, not out of band)."""
    return render_to_string("sessions/_notice.html", {"text": text, "level": level, "oob": False, "inner": True})


def render_message(message, *, stream_id: str | None = None, oob: bool = True) -> str:
    """A transcript entry. With `stream_id`, it replaces the streaming placeholder of that call."""
    ctx = {"m": message, "entry": transcript.message_entry(message), "oob": oob, "stream_id": stream_id}
    return render_to_string("sessions/_message.html", ctx)


def render_stream_start(stream_id: str) -> str:
    """A new streaming placeholder (any earlier copy of it removed first: a page that loaded the
    stream from the database may also receive its start)."""
    return render_to_string("sessions/_stream_start.html", {"s": {"stream_id": stream_id, "text": ""}})


def render_stream_delta(stream_id: str, text: str) -> str:
    return render_to_string("sessions/_stream_delta.html", {"stream_id": stream_id, "text": text})


def render_stream_text(stream_id: str, text: str) -> str:
    """The whole text streamed so far, replacing what the placeholder shows (heals a gap left by
    deltas a reconnecting page missed)."""
    return render_to_string("sessions/_stream_text.html", {"stream_id": stream_id, "text": text})


def render_stream_removed(stream_id: str) -> str:
    return f'<div id="{stream_id}" hx-swap-oob="delete"></div>'


def render_turn_entry(turn) -> str:
    """A failed or stopped turn, appended where it ended."""
    return render_to_string("sessions/_turn_entry_oob.html", {"entry": transcript.turn_entry(turn)})


def render_queued(turn) -> str:
    """A turn waiting to start, appended to the queue below the transcript (idempotent)."""
    return render_to_string("sessions/_queued_oob.html", {"t": turn})


def render_queued_removed(turn) -> str:
    return f'<div id="queued-{turn.id}" hx-swap-oob="delete"></div>'


def render_mcp_switch(conversation, *, oob: bool = True) -> str:
    """The conversation's MCP servers with their switches (nothing when no server is enabled)."""
    from sessions.services.mcp import conversation_servers

    return render_to_string("sessions/_mcp_switch.html", {"conversation": conversation, "oob": oob,
                                                          "servers": conversation_servers(conversation)})


def render_gauge(conversation, *, oob: bool = True, cfg=None) -> str:
    return render_to_string("sessions/_gauge.html", {"g": presenters.gauge(conversation, cfg=cfg), "oob": oob})


def render_cache_panel(conversation, *, oob: bool = True, cfg=None) -> str:
    return render_to_string("sessions/_cache_panel.html",
                            {"c": presenters.cache_panel(conversation, cfg=cfg), "oob": oob})


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


def render_turn_status(conversation, *, oob: bool = True, turns=None, events=None) -> str:
    """The status line under the transcript: what runs, what waits, and the buttons for it."""
    turns = transcript.turns_shown(conversation) if turns is None else turns
    events = selectors.compression_events(conversation, limit=5) if events is None else events
    return render_to_string("sessions/_turn_status.html",
                            {"s": transcript.state(conversation, turns, events), "oob": oob})


def render_transcript(conversation, *, oob: bool = True, turns=None, events=None) -> str:
    turns = transcript.turns_shown(conversation) if turns is None else turns
    return render_to_string("sessions/_transcript.html", {
        "entries": transcript.transcript(conversation, turns, known_events=events), "queue": transcript.queue(turns),
        "oob": oob})


def render_title_changed(conversation) -> str:
    """The title in the page's heading and in the conversation's sidebar row (out of band: only
    the text of each changes)."""
    return render_to_string("sessions/sidebar/_title_oob.html", {"c": conversation})


def render_live_state(conversation) -> str:
    """Everything live, re-rendered from the database (sent on every socket (re)connect)."""
    from sessions.services.runtime import current_config

    cfg = current_config()
    turns = transcript.turns_shown(conversation)
    events = selectors.compression_events(conversation)
    parts = [render_gauge(conversation, cfg=cfg), render_cache_panel(conversation, cfg=cfg),
             render_to_string("sessions/_event_feed.html", {"events": events, "oob": True}),
             render_transcript(conversation, turns=turns, events=events), render_turn_status(conversation, turns=turns, events=events),
             render_title_changed(conversation)]  # a title made while the socket was down
    return "\n".join(parts)


def render_model_switch_confirm(conversation, choice, cfg, *, request=None) -> str:
    """The warning a model switch asks the user to confirm: the cache starts cold, and the window
    and compression threshold the next request will use."""
    from llm.models import model_label
    from sessions.models import Conversation
    from sessions.services.feasibility import feasibility
    from sessions.services.routes import window_override

    target = Conversation(owner_id=conversation.owner_id, provider=choice.provider, model=choice.model,
                          context_length=window_override(cfg, choice), max_tokens=conversation.max_tokens)
    now, then = feasibility(cfg, conversation=conversation), feasibility(cfg, conversation=target)
    return render_to_string("sessions/_model_switch_confirm.html", {
        "conversation": conversation, "choice": choice, "label": model_label(choice.model),
        "old_label": model_label(conversation.model), "now": now, "then": then,
        "figures": {"window": (f"{now.main_window:,}", f"{then.main_window:,}"),
                    "threshold": (f"{now.main_threshold:,}", f"{then.main_threshold:,}")},
    }, request=request)
