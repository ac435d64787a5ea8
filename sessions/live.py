"""What the browser is told, one function per push: a message added, a streamed delta, the gauge,
the cache panel, a turn queued, started, stopped, failed or cancelled, a compression's progress, a
new title, a notice, and the whole live state a socket receives when it (re)connects (or, when
the page already shows that state, a word saying so: `connect_state`).

Services and the agent loop call these; they never render HTML themselves. Each push renders the
same fragment the page view renders (`sessions.fragments`), so a reconnect and a push agree.

Every push goes through one batcher per process (`_Batches`, at the end): it is sent by the
process's publishing loop, and whatever is waiting when that loop gets to it goes to Redis in one
batch (`group_send_many`): two round trips for any number of events, where channels_redis's
``group_send`` takes four for each one.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections import defaultdict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django.utils.crypto import constant_time_compare, salted_hmac

from compression.core.registry import BUILTIN_ENGINES
from sessions import events, fragments, selectors
from sessions.events import EventKind, group_name
from sessions.services.runtime import current_config

log = logging.getLogger(__name__)


def broadcast(conversation_id, kind: EventKind, html: str) -> None:
    """One event to the conversation's open pages. Never raises: live updates are best effort, and
    a page re-renders from the database on reconnect."""
    _batches.send([(conversation_id, kind, html)])


def message_added(message, *, stream_id: str | None = None) -> None:
    """A stored message; with `stream_id` it replaces that call's streaming placeholder."""
    broadcast(message.conversation_id, "message", fragments.render_message(message, stream_id=stream_id))


def tool_result_added(message) -> None:
    broadcast(message.conversation_id, "tool_result", fragments.render_message(message))


def stream_started(conversation_id, stream_id: str) -> None:
    broadcast(conversation_id, "delta", fragments.render_stream_start(stream_id))


def stream_delta(conversation_id, stream_id: str, text: str) -> None:
    broadcast(conversation_id, "delta", fragments.render_stream_delta(stream_id, text))


def stream_deltas(deltas) -> None:
    """Several streams' deltas at once, ``(conversation id, stream id, text)`` each: one call to the
    channel layer (what a worker running several turns sends within one flush interval)."""
    _batches.send([(conversation_id, "delta", fragments.render_stream_delta(stream_id, text))
                   for conversation_id, stream_id, text in deltas])


def stream_text(conversation_id, stream_id: str, text: str) -> None:
    """The whole text so far (sent about once a second while a reply streams)."""
    broadcast(conversation_id, "delta", fragments.render_stream_text(stream_id, text))


def stream_removed(conversation_id, stream_id: str) -> None:
    """A placeholder that will get no message (the turn failed or was stopped before any text)."""
    broadcast(conversation_id, "delta", fragments.render_stream_removed(stream_id))


def gauge_changed(conversation, *, figures=None, cfg=None) -> None:
    """The gauge again; ``figures`` (`presenters.GaugeFigures`): what the agent loop already has
    after a model call (the session, the next request's messages and tools, the engine's word),
    so the push reads no context and builds no engine."""
    broadcast(conversation.id, "gauge", fragments.render_gauge(conversation, figures=figures, cfg=cfg))


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


def live_state(conversation, *, cfg=None) -> str:
    """Everything live, re-rendered from the database (sent on a socket's (re)connect unless the
    page already shows it: `connect_state`)."""
    return fragments.render_live_state(conversation, cfg=cfg)


# The version of `state_version`'s recipe: a change to what goes into it changes every version.
_RECIPE = "live-state-1"


def state_version(conversation, cfg, marks: dict | None = None) -> str:
    """A fingerprint of what the live panels show: equal for two reads only if they would render
    the same panels. The page renders it into its socket's URL (read *before* the panels it
    renders, so anything that changes meanwhile makes the socket's read differ); the connect
    compares it with the database's and skips the render when they agree.

    Made of the conversation's own fields (``conversation`` as the caller holds it), the settings
    (``cfg``, as the caller rendered with them) and `selectors.live_marks` (``marks``, read in one
    query when not given). "" (never equal) when the gauge's figures depend on the time: an engine
    that is not built in, or a session whose stored state says compression may be paused."""
    if marks is None:
        marks = selectors.conversation_live_marks(conversation)
    if not marks or cfg.context.engine not in BUILTIN_ENGINES or (cfg.compression.enabled and marks["live_paused"]):
        return ""
    parts = (_RECIPE, str(conversation.pk), conversation.title, conversation.provider, conversation.model,
             conversation.context_length, conversation.max_tokens, conversation.mcp_off, repr(cfg),
             *(marks[name] for name in selectors.LIVE_MARKS))
    # Keyed: the settings that go into it include secrets, and the page shows the result.
    return salted_hmac(_RECIPE, repr(parts)).hexdigest()[:32]


def _marks_of(conversation) -> dict:
    return {name: getattr(conversation, name) for name in (*selectors.LIVE_MARKS, "live_paused")}


def connect_state(*, user, conversation_id, shown: str = "") -> tuple[object | None, str]:
    """A socket's (re)connect in one go on the database thread: the conversation if ``user`` may
    watch it (else None), and what to send first: `fragments.LIVE_SYNCED` when ``shown`` (the
    `state_version` the page was rendered at) is the database's (two queries: the settings, then
    the conversation with its marks), else the whole live state, re-rendered from the database
    after those reads."""
    cfg = current_config()
    conversation = selectors.conversation_get_for_user_with_live_marks(user=user, conversation_id=conversation_id)
    if conversation is None:
        return None, ""
    if shown and constant_time_compare(shown, state_version(conversation, cfg, _marks_of(conversation))):
        return conversation, fragments.LIVE_SYNCED
    return conversation, live_state(conversation, cfg=cfg)


# --- Publishing --------------------------------------------------------------------------------

SCORE_STEP = 1e-6  # seconds between the scores of two events of a batch (a double keeps 2.4e-7 at today's epoch)

# Adds the events of one batch for one Redis server. KEYS: a channel key per event (repeated when
# several events go to one Daphne process); ARGV: the serialised events, then their channels'
# capacities, then their scores, then the expiry. channels_redis's group_send script, for a batch.
_GROUP_SEND_MANY = """
local n = #KEYS
local over = 0
for i = 1, n do
    if redis.call('ZCOUNT', KEYS[i], '-inf', '+inf') < tonumber(ARGV[n + i]) then
        redis.call('ZADD', KEYS[i], ARGV[2 * n + i], ARGV[i])
        redis.call('EXPIRE', KEYS[i], ARGV[3 * n + 1])
    else
        over = over + 1
    end
end
return over
"""


async def group_send_many(layer: RedisChannelLayer, sends: list[tuple[str, dict]], *,
                          first_score: float) -> tuple[int, float]:
    """``layer.group_send(group, message)`` for every pair, in order, in two pipelined round trips
    per Redis server: the groups' members, then the events with one script. The events' scores
    (a consumer receives a channel's events by score) rise from ``first_score`` in the order given,
    so a batch keeps the order of its events. Returns how many were dropped at a full channel, and
    the score after the last one used."""
    now = int(time.time())
    by_server: dict[int, list[int]] = defaultdict(list)
    for position, (group, _) in enumerate(sends):
        by_server[layer.consistent_hash(group)].append(position)
    members: list[list[str]] = [[] for _ in sends]
    for index, positions in by_server.items():
        pipe = layer.connection(index).pipeline(transaction=False)
        for position in positions:
            key = layer._group_key(sends[position][0])
            pipe.zremrangebyscore(key, min=0, max=now - layer.group_expiry)
            pipe.zrange(key, 0, -1)
        replies = await pipe.execute()
        for position, channels in zip(positions, replies[1::2]):
            members[position] = [c.decode("utf8") for c in channels]
    writes: dict[int, list[tuple[bytes, bytes, int]]] = defaultdict(list)
    for (_, message), channels in zip(sends, members):
        keys_by_server, payloads, capacities = layer._map_channel_keys_to_connection(channels, message)
        for index, keys in keys_by_server.items():
            writes[index].extend((key, payloads[key], capacities[key]) for key in keys)
    over = 0
    score = first_score
    for index, rows in writes.items():
        scores = []
        for _ in rows:
            scores.append(repr(score))
            score += SCORE_STEP
        pipe = layer.connection(index).pipeline(transaction=False)
        for key in dict.fromkeys(key for key, _, _ in rows):
            pipe.zremrangebyscore(key, min=0, max=now - int(layer.expiry))
        pipe.eval(_GROUP_SEND_MANY, len(rows), *(key for key, _, _ in rows), *(payload for _, payload, _ in rows),
                  *(capacity for _, _, capacity in rows), *scores, layer.expiry)
        over += (await pipe.execute())[-1]
    return over, score


async def group_add_many(layer, groups: list[str], channel: str) -> None:
    """``layer.group_add(group, channel)`` for every group, in one pipelined round trip per Redis
    server (channels_redis takes two for each group); one by one on another layer."""
    if not isinstance(layer, RedisChannelLayer):
        for group in groups:
            await layer.group_add(group, channel)
        return
    now = time.time()
    for index, names in _by_server(layer, groups, channel).items():
        pipe = layer.connection(index).pipeline(transaction=False)
        for group in names:
            pipe.zadd(layer._group_key(group), {channel: now})
            pipe.expire(layer._group_key(group), layer.group_expiry)
        await pipe.execute()


async def group_discard_many(layer, groups: list[str], channel: str) -> None:
    """``layer.group_discard(group, channel)`` for every group, in one round trip per Redis server."""
    if not isinstance(layer, RedisChannelLayer):
        for group in groups:
            await layer.group_discard(group, channel)
        return
    for index, names in _by_server(layer, groups, channel).items():
        pipe = layer.connection(index).pipeline(transaction=False)
        for group in names:
            pipe.zrem(layer._group_key(group), channel)
        await pipe.execute()


def _by_server(layer: RedisChannelLayer, groups: list[str], channel: str) -> dict[int, list[str]]:
    assert layer.require_valid_channel_name(channel), "Channel name not valid"
    by_server: dict[int, list[str]] = defaultdict(list)
    for group in groups:
        assert layer.require_valid_group_name(group), "Group name not valid"
        by_server[layer.consistent_hash(group)].append(group)
    return by_server


class _Batches:
    """Pushes from any thread, sent on the process's publishing loop (`sessions.events`): a caller
    waits until its events are in Redis, and the events that arrived while a batch was being sent
    go together in the next one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._waiting: list[tuple[list[tuple[str, dict]], concurrent.futures.Future]] = []
        self._running: asyncio.Task | None | bool = None  # the task sending, while one does
        self._last_score = 0.0

    def send(self, items: list[tuple[object, EventKind, str]], timeout: float = 10.0) -> None:
        sends = [(group_name(cid), {"type": "conversation.event", "kind": kind, "html": html}) for cid, kind, html in items]
        if not sends:
            return
        try:
            layer = get_channel_layer()
            if layer is None:
                return
            if not isinstance(layer, RedisChannelLayer):
                # In-memory layers are bound to the caller's loop (tests): publish on it, one by one.
                for group, message in sends:
                    async_to_sync(layer.group_send)(group, message)
                return
            done: concurrent.futures.Future = concurrent.futures.Future()
            with self._lock:
                if self._pid != os.getpid():  # a forked child starts with nothing in flight
                    self._pid, self._waiting, self._running = os.getpid(), [], None
                self._waiting.append((sends, done))
                start = self._running is None
                if start:
                    self._running = True
            if start:
                events.publishing_loop().call_soon_threadsafe(self._start, layer)
            done.result(timeout)
        except Exception:
            for cid, kind, _ in items:
                log.warning("broadcast of %s to conversation %s failed", kind, cid, exc_info=True)

    def _start(self, layer) -> None:
        self._running = asyncio.ensure_future(self._drain(layer))  # kept: the loop holds tasks weakly

    async def _drain(self, layer) -> None:
        while True:
            with self._lock:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._running = None
                    return
            sends = [pair for pairs, _ in batch for pair in pairs]
            try:
                over, self._last_score = await group_send_many(layer, sends,
                                                               first_score=max(time.time(), self._last_score))
                if over:
                    log.info("%s events dropped at a full channel", over)
            except Exception as exc:
                for _, done in batch:
                    done.set_exception(exc)
            else:
                for _, done in batch:
                    done.set_result(None)


_batches = _Batches()
