"""One render function per fragment, used by the page views and by the websocket pushes, so a
push and a reconnect produce the same markup. Fragments pushed over the socket carry
`hx-swap-oob` (the htmx websocket extension swaps them by id)."""
from __future__ import annotations

import zlib

from django.template.loader import render_to_string
from django.utils.html import escape

from llm.models import model_label
from sessions import presenters, selectors, transcript
from sessions.models import Conversation, Turn
from sessions.services.feasibility import feasibility
from sessions.services.mcp import conversation_servers
from sessions.services.routes import window_override
from sessions.services.runtime import current_config

# The kinds of notice a page keeps at most one of (static/js/notices.js removes the earlier notice of
# a kind when a new one lands). A notice of no known kind gets one derived from its text.
PREVIEW = "compaction-preview"
COMPRESSION_QUEUED = "compression-queued"
COMPRESSION_DUPLICATE = "compression-duplicate"
COMPRESSION_REFUSED = "compression-refused"
MODEL_SWITCH = "model-switch"
QUEUE_CANCEL = "queue-cancel"
SEND_ERROR = "send-error"
SEND_QUEUE_DOWN = "send-queue-down"
TURN_ACTION = "turn-action"
NEW_CONVERSATION = "new-conversation"

# What a compression event's row in the event feed shows once it ended, whichever way.
_ENDED = ":is([data-status=compressed],[data-status=aborted],[data-status=noop],[data-status=failed],[data-status=skipped])"


def notice_kind(text: str, level: str = "info") -> str:
    """The kind a notice is known by when its caller named none, derived from its text: the same
    announcement twice is one notice, two different ones are two."""
    return f"{level}-{zlib.crc32(text.encode()):08x}"


def expires_when_event_ends(event_id: int) -> str:
    """The selector (`data-expires-on`) that matches once compression event `event_id` ended: the
    event feed pushed over the socket shows its final status."""
    return f"#event-{int(event_id)}{_ENDED}"


def expires_when_compacted_after(event_id: int | None) -> str:
    """The selector that matches once a compaction newer than `event_id` (None: any) was committed
    or aborted: the (newest-first) event feed shows it above `#event-<event_id>`."""
    newer = "#event-feed li.event:is([data-status=compressed],[data-status=aborted])"
    return newer if event_id is None else f"{newer}:has(~ #event-{int(event_id)})"


def _notice_context(text: str, level: str, kind: str | None, expires_on: str, expires_after: int | None) -> dict:
    return {"text": text, "level": level, "kind": kind or notice_kind(text, level), "expires_on": expires_on,
            "expires_after": expires_after}


def render_notice(text: str, *, level: str = "info", kind: str | None = None, expires_on: str = "",
                  expires_after: int | None = None) -> str:
    """A notice pushed over the socket (appended to `#notices` out of band). `kind`: what it
    replaces (see `notice_kind`); `expires_on`: a CSS selector whose first match on the page
    removes it; `expires_after`: seconds it stays."""
    ctx = _notice_context(text, level, kind, expires_on, expires_after)
    return render_to_string("sessions/_notice.html", {**ctx, "oob": True})


def render_to_notice(text: str, *, level: str = "info", kind: str | None = None, expires_on: str = "",
                     expires_after: int | None = None) -> str:
    """A notice as the direct answer to an htmx request (swapped by the request, not out of band)."""
    ctx = _notice_context(text, level, kind, expires_on, expires_after)
    return render_to_string("sessions/_notice.html", {**ctx, "oob": False, "inner": True})


def render_message(message, *, stream_id: str | None = None, oob: bool = True) -> str:
    """A transcript entry. With `stream_id`, it replaces the streaming placeholder of that call."""
    ctx = {"m": message, "entry": transcript.message_entry(message), "oob": oob, "stream_id": stream_id}
    return render_to_string("sessions/_message.html", ctx)


def render_stream_start(stream_id: str) -> str:
    """A new streaming placeholder, appended (static/js/oob.js removes an earlier copy first: a page
    that loaded the stream from the database may also receive its start)."""
    return render_to_string("sessions/_stream_start.html", {"s": {"stream_id": stream_id, "text": ""}})


def render_stream_delta(stream_id: str, text: str) -> str:
    """A piece of a streaming reply, appended to its placeholder. The markup of
    ``sessions/_stream_delta.html`` built without the template engine: a worker sends one every
    50 ms for each reply it streams."""
    return f'<div id="{escape(stream_id)}-text" hx-swap-oob="beforeend">{escape(text)}</div>'


def render_stream_text(stream_id: str, text: str) -> str:
    """The whole text streamed so far, replacing what the placeholder shows (heals a gap left by
    deltas a reconnecting page missed)."""
    return render_to_string("sessions/_stream_text.html", {"stream_id": stream_id, "text": text})


def render_stream_removed(stream_id: str) -> str:
    return f'<div id="{stream_id}" hx-swap-oob="delete"></div>'


def render_turn_entry(turn) -> str:
    """A failed or stopped turn, appended where it ended."""
    return render_to_string("sessions/_turn_entry_oob.html", {"entry": transcript.turn_entry(turn)})


def render_queue(conversation_id) -> str:
    """The whole queue below the transcript, read from the database: a push that arrives late or
    twice leaves it right, and none targets an entry the page may not have."""
    queue = Turn.objects.filter(conversation_id=conversation_id, status="queued").select_related("user_message")
    return render_to_string("sessions/_queue.html", {"queue": queue.order_by("id"), "oob": True})


def render_mcp_switch(conversation, *, oob: bool = True) -> str:
    """The conversation's MCP servers with their switches (nothing when no server is enabled)."""
    return render_to_string("sessions/_mcp_switch.html", {"conversation": conversation, "oob": oob,
                                                          "servers": conversation_servers(conversation)})


def render_gauge(conversation, *, oob: bool = True, cfg=None, figures=None) -> str:
    """The gauge; ``figures``: what the caller already has (`presenters.GaugeFigures`)."""
    return render_to_string("sessions/_gauge.html", {"g": presenters.gauge(conversation, cfg=cfg, figures=figures),
                                                     "oob": oob})


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


# What a socket's (re)connect sends instead of the live state when the page already shows it
# (`live.connect_state`): a comment, so htmx swaps nothing, and the page marks its socket synced
# as after any first message.
LIVE_SYNCED = "<!-- live: synced -->"


def render_live_state(conversation, *, cfg=None) -> str:
    """Everything live, re-rendered from the database (sent on a socket's (re)connect when the
    page's copy may be stale); ``cfg``: the settings, when the caller has read them."""
    cfg = cfg or current_config()
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
    target = Conversation(owner_id=conversation.owner_id, provider=choice.provider, model=choice.model,
                          context_length=window_override(cfg, choice), max_tokens=conversation.max_tokens)
    now, then = feasibility(cfg, conversation=conversation), feasibility(cfg, conversation=target)
    return render_to_string("sessions/_model_switch_confirm.html", {
        "conversation": conversation, "choice": choice, "label": model_label(choice.model),
        "old_label": model_label(conversation.model), "now": now, "then": then,
        "figures": {"window": (f"{now.main_window:,}", f"{then.main_window:,}"),
                    "threshold": (f"{now.main_threshold:,}", f"{then.main_threshold:,}")},
    }, request=request)
