"""Read-side queries, and nothing else (the figures made from them are `sessions.presenters`).
Every lookup of a conversation by a user goes through the owner check here."""
from __future__ import annotations

import uuid

from django.core.exceptions import ValidationError
from django.db import connections, router
from django.db.models import CharField, Count, Exists, Func, Max, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Cast, Coalesce, Length
from django.utils import timezone

from compression.core.compressor_state import ANTI_THRASH_LIMIT
from compression.models import MCP_STATES, MCPServer
from sessions.models import (
    ApiCall,
    Attachment,
    CompressionEvent,
    Conversation,
    ConversationLock,
    Message,
    ModelTokenRatio,
    Session,
    Turn,
)

TRANSCRIPT_LIMIT = 500
RECENT_CALLS = 40


def conversation_get_for_user(*, user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(id=conversation_id, owner=user).first()


def has_content() -> Q:
    """A conversation with something in it: a turn (sent, even if still waiting), or a message
    other than a transcript line such as a model switch. One without is "empty": not listed, and
    reused by the next new conversation."""
    return Q(Exists(Turn.objects.filter(conversation=OuterRef("pk")))) | Q(Exists(
        Message.objects.filter(conversation=OuterRef("pk")).exclude(role="system")))


def conversation_list_for_user(*, user, including=None):
    """The user's conversations with something in them, newest activity first; ``including`` (a
    conversation id) is listed even when empty (the one that is open)."""
    listed = (has_content() | Q(id=including)) if including is not None else has_content()
    return (Conversation.objects.filter(listed, owner=user).order_by("-last_activity_at")
            .annotate(compressions=Count("compression_events", filter=Q(compression_events__status="compressed"))))


def conversation_is_empty(conversation: Conversation) -> bool:
    return not Conversation.objects.filter(has_content(), pk=conversation.pk).exists()


def conversation_newest_empty(*, user) -> Conversation | None:
    return Conversation.objects.filter(owner=user).exclude(has_content()).order_by("-last_activity_at").first()


def conversation_titles_matching(*, user, terms, limit: int):
    """The user's conversations whose title holds every one of ``terms`` (case-insensitive),
    newest first."""
    rows = Conversation.objects.filter(owner=user)
    for term in terms:
        rows = rows.filter(title__icontains=term)
    return list(rows.order_by("-last_activity_at")[:limit])


def conversation_titles(*, user, ids) -> dict:
    """{id: title} of those of ``ids`` that are the user's."""
    return dict(Conversation.objects.filter(owner=user, id__in=ids).values_list("id", "title"))


def first_exchange(conversation: Conversation) -> tuple[str, str] | None:
    """The text of the conversation's first user message and of the first assistant reply after
    it (None before there is both)."""
    rows = conversation.messages.filter(visible=True, is_summary=False, role__in=("user", "assistant"))
    first = rows.filter(role="user").order_by("id").first()
    reply = rows.filter(role="assistant", id__gt=first.id).order_by("id").first() if first else None
    if first is None or reply is None:
        return None
    return _text_of(first.content), _text_of(reply.content)


def conversation_busy(conversation: Conversation) -> str | None:
    """"turn" while a turn runs or waits, "compression" while a compression is queued or runs (or
    an unexpired lease of either kind is held), else None."""
    leases = set(ConversationLock.objects.filter(conversation=conversation, expires_at__gt=timezone.now())
                 .values_list("kind", flat=True))
    if "turn" in leases or conversation.turns.filter(status__in=("queued", "running")).exists():
        return "turn"
    if "compression" in leases or conversation.compression_events.filter(status__in=("queued", "running")).exists():
        return "compression"
    return None


def _text_of(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, dict):
            if block.get("type") == "text":
                parts.append(block.get("text", ""))
            elif block.get("type") in ("image", "image_url"):
                parts.append("[image]")
    return "\n".join(parts)


_NOT_LOOKED_UP = object()


def transcript_entry(message: Message, event=_NOT_LOOKED_UP) -> dict:
    """One transcript entry; a divider's compression event is looked up unless it is given."""
    entry = {"id": message.id, "role": message.role, "text": _text_of(message.content), "tool_calls": [],
             "is_summary": message.is_summary, "name": message.name, "event": None}
    for call in message.tool_calls or []:
        if not isinstance(call, dict):
            continue
        fn = call.get("function") or {}
        entry["tool_calls"].append({"id": call.get("id", ""), "name": fn.get("name", ""), "arguments": fn.get("arguments", "")})
    if message.is_summary:
        entry["event"] = (CompressionEvent.objects.filter(summary_message=message).first()
                          if event is _NOT_LOOKED_UP else event)
    return entry


def transcript(conversation: Conversation) -> list[dict]:
    """Visible messages in order (originals plus compaction dividers), the newest TRANSCRIPT_LIMIT;
    the dividers' events in one query."""
    rows = list(conversation.messages.filter(visible=True).order_by("-id")[:TRANSCRIPT_LIMIT])
    rows.reverse()
    summary_ids = [m.id for m in rows if m.is_summary]
    events = {e.summary_message_id: e for e in CompressionEvent.objects.filter(summary_message_id__in=summary_ids)} \
        if summary_ids else {}
    return [transcript_entry(m, events.get(m.id)) for m in rows]


def compression_events(conversation: Conversation, limit: int = 20):
    return list(conversation.compression_events.order_by("-id")[:limit])


def session_active_with_ratio(conversation: Conversation) -> tuple[Session, tuple[float, float]]:
    """The active session (or an unsaved empty one) and its model's measured (real, counted) sums
    (zeros when none), in one query."""
    sums = ModelTokenRatio.objects.filter(model=conversation.model)
    session = (conversation.sessions.filter(ended_at__isnull=True).order_by("-id")
               .annotate(ratio_real=Subquery(sums.values("real_sum")[:1]),
                         ratio_counted=Subquery(sums.values("counted_sum")[:1])).first())
    if session is None:
        return Session(conversation=conversation), (0.0, 0.0)
    return session, (session.ratio_real or 0.0, session.ratio_counted or 0.0)


_TOTALS = ("prompt", "read", "write", "w5", "w1h", "agent_cost", "nocache", "n", "summariser_cost")


def api_calls_panel(conversation: Conversation, limit: int = RECENT_CALLS) -> tuple[dict, list[ApiCall]]:
    """The sums over the conversation's successful agent calls (and what its summariser calls cost),
    and its last ``limit`` successful agent calls, oldest first, in one query: the recent calls carry the totals
    (subqueries the database runs once), with the newest summariser call added so the totals come
    back when there is no agent call (it is not among the recent ones returned)."""
    calls = ApiCall.objects.filter(conversation=conversation)
    agent = Q(purpose="agent", error="")

    def total(aggregate, where: Q):
        return Subquery(calls.filter(where).order_by().values("conversation_id").annotate(v=aggregate).values("v")[:1])

    newest_summariser = calls.filter(purpose="compression").order_by("-id").values("id")[:1]
    rows = list(calls.filter(agent | Q(id=Subquery(newest_summariser))).select_related("session").annotate(
        total_prompt=total(Sum("prompt_tokens"), agent), total_read=total(Sum("cache_read_tokens"), agent),
        total_write=total(Sum("cache_write_tokens"), agent), total_w5=total(Sum("cache_write_5m_tokens"), agent),
        total_w1h=total(Sum("cache_write_1h_tokens"), agent), total_agent_cost=total(Sum("cost"), agent),
        total_nocache=total(Sum("cost_without_cache"), agent), total_n=total(Count("id"), agent),
        total_summariser_cost=total(Sum("cost"), Q(purpose="compression"))).order_by("-id")[:limit + 1])
    totals = {name: getattr(rows[0], f"total_{name}") if rows else None for name in _TOTALS}
    if not totals["n"]:
        totals["n"] = 0
    recent = [r for r in rows if r.purpose == "agent" and r.error == ""][:limit]
    recent.reverse()
    return totals, recent


def active_sessions_by_conversation(ids) -> dict:
    sessions: dict = {}
    for s in Session.objects.filter(conversation_id__in=ids, ended_at__isnull=True).order_by("id"):
        sessions[s.conversation_id] = s  # the newest active session wins
    return sessions


def context_token_sums(session_ids) -> dict:
    """{session id: (sum of stored token counts, message count)} of the sessions' live context."""
    rows = (Message.objects.filter(session_id__in=session_ids, archived=False).order_by().values("session_id")
            .annotate(total=Sum("token_count"), n=Count("id")))
    return {r["session_id"]: (r["total"] or 0, r["n"]) for r in rows}


def api_call_totals_by_conversation(ids) -> dict:
    """{conversation id: (prompt tokens, cache-read tokens)} of successful agent calls."""
    rows = (ApiCall.objects.filter(conversation_id__in=ids, purpose="agent", error="").order_by()
            .values("conversation_id").annotate(prompt=Sum("prompt_tokens"), read=Sum("cache_read_tokens")))
    return {r["conversation_id"]: (r["prompt"] or 0, r["read"] or 0) for r in rows}


def compaction_originals(event: CompressionEvent):
    """The messages a compaction replaced: the ended session's context (rotation) or the rows it
    archived (in place)."""
    if event.in_place:
        rows = event.session.messages.filter(archived=True)
        if event.summary_message_id:
            rows = rows.filter(id__lt=event.summary_message_id)
        return rows.order_by("seq")
    return event.session.messages.order_by("seq")


# --- What the live panels depend on ------------------------------------------------------------

class _Joined(Func):
    """Texts joined with "|" by the SQL operator both SQLite and PostgreSQL have (Concat nests a
    function call for every part, past SQLite's parser depth for this many)."""

    arg_joiner = " || '|' || "
    template = "(%(expressions)s)"
    output_field = CharField()


def _marks(rows, *aggregates) -> Subquery:
    """One text made of ``aggregates`` over ``rows``, as a subquery (a single row: grouped by a
    constant, which is no grouping)."""
    parts = [Coalesce(Cast(aggregate, CharField()), Value("-")) for aggregate in aggregates]
    return Subquery(rows.order_by().annotate(one=Value(1)).values("one").annotate(marks=_Joined(*parts)).values("marks")[:1])


def _per_status(statuses, field: str = "status") -> list:
    return [Count("id", filter=Q(**{field: s})) for s in statuses]


def live_marks() -> dict:
    """Annotations for a conversation row: a few aggregates, over indexed rows, of everything its
    live panels show (the gauge, the cache panel, the event feed, the transcript, the status line),
    one text for each kind of row. Any change a panel would show changes one of them: rows are
    only added, never deleted, and what changes in place moves a count, a sum or a maximum
    (a turn's status and streamed text, a message archived, replaced or stopped, a compression's
    status and phase, the active session's state, the model's measured ratio, the MCP servers).
    ``live_paused``: the active session's stored state says compression may be paused (the gauge
    then asks an engine, whose answer depends on the time)."""
    mine = {"conversation": OuterRef("pk")}
    active = Q(ended_at__isnull=True)
    running = Q(status__in=("queued", "running"))
    return {
        "live_messages": _marks(Message.objects.filter(**mine), Max("id"), Count("id"), Count("id", filter=Q(archived=True)),
                                Count("id", filter=Q(replaced=True)), Count("id", filter=Q(stopped=True)),
                                Count("id", filter=Q(visible=True)), Sum("token_count")),
        "live_turns": _marks(Turn.objects.filter(**mine), Max("id"), *_per_status(s for s, _ in Turn.STATUS),
                             Sum("iterations"), Count("partial_text"), Sum(Length("partial_text")),
                             Count("id", filter=Q(stop_requested=True)), Count("user_message"), Count("finished_at"),
                             Sum(Length("error"))),
        "live_sessions": _marks(Session.objects.filter(**mine), Max("id"), Count("id"), Count("ended_at"),
                                *(Max(name, filter=active) for name in (
                                    "compression_count", "last_prompt_tokens", "counted_prompt_tokens", "context_length",
                                    "cooldown_until", "ineffective_count")),
                                Max(Length("system_prompt"), filter=active)),
        "live_events": _marks(CompressionEvent.objects.filter(**mine), Max("id"), Count("id"),
                              *_per_status(s for s, _ in CompressionEvent.STATUS), Max("phase", filter=running),
                              Max("started_at"), Count("finished_at"), Count("summary_message"),
                              *(Sum(name) for name in ("messages_before", "messages_after", "tokens_before",
                                                       "tokens_after", "messages_read", "tokens_read",
                                                       "summariser_calls", "duration_ms")),
                              *(Sum(Length(name)) for name in ("reason", "aux_failure", "focus_topic", "summary"))),
        "live_calls": _marks(ApiCall.objects.filter(**mine), Max("id"), Count("id")),
        "live_files": _marks(Attachment.objects.filter(**mine), Max("id"), Count("message")),
        "live_ratio": _marks(ModelTokenRatio.objects.filter(model=OuterRef("model")), Max("real_sum"), Max("counted_sum")),
        "live_mcp": _marks(MCPServer.objects.filter(enabled=True), Count("id"), Sum("id"), Max("id"), Sum("generation"),
                           Sum("state_generation"), Sum("failures"), Max("checked_at"),
                           *_per_status((s for s, _ in MCP_STATES), "state")),
        "live_paused": Exists(Session.objects.filter(active, conversation=OuterRef("pk")).filter(
            Q(cooldown_until__isnull=False) | Q(ineffective_count__gte=ANTI_THRASH_LIMIT))),
    }


LIVE_MARKS = ("live_messages", "live_turns", "live_sessions", "live_events", "live_calls", "live_files", "live_ratio",
              "live_mcp")

# The query of `conversation_get_for_user_with_live_marks`, compiled once per database: building
# and compiling its expressions takes the ORM about 20 ms, running it a fifth of a millisecond.
# Compiled with stand-ins for the conversation and its owner, replaced by position when it runs.
_ANY_CONVERSATION = uuid.UUID("6c697665-6d61-726b-7300-5e1ec7ed0000")
_ANY_OWNER = -7_341_213
_live_sql: dict[tuple[str, str], tuple[str, tuple, dict[int, str]]] = {}


def _live_marks_query(db) -> tuple[str, tuple, dict[int, str]]:
    key = (db.alias, db.vendor)
    if key not in _live_sql:
        rows = Conversation.objects.using(db.alias).filter(id=_ANY_CONVERSATION, owner_id=_ANY_OWNER)
        sql, params = rows.annotate(**live_marks()).query.get_compiler(db.alias).as_sql()
        stand_ins = {Conversation._meta.pk.get_db_prep_value(_ANY_CONVERSATION, db): "conversation", _ANY_OWNER: "owner"}
        slots = {i: stand_ins[p] for i, p in enumerate(params) if isinstance(p, int | str | uuid.UUID) and p in stand_ins}
        if sorted(slots.values()) != ["conversation", "owner"]:
            raise RuntimeError("the live marks' query does not take its conversation and owner once each")
        _live_sql[key] = (sql, tuple(params), slots)
    return _live_sql[key]


def _with_live_marks(*, owner_id, conversation_id) -> Conversation | None:
    db = connections[router.db_for_read(Conversation)]
    sql, params, slots = _live_marks_query(db)
    try:
        given = {"conversation": Conversation._meta.pk.get_db_prep_value(Conversation._meta.pk.to_python(conversation_id), db),
                 "owner": int(owner_id)}
    except (ValidationError, TypeError, ValueError):
        return None
    rows = Conversation.objects.using(db.alias).raw(sql, [given[slots[i]] if i in slots else p for i, p in enumerate(params)])
    return next(iter(rows), None)


def conversation_get_for_user_with_live_marks(*, user, conversation_id) -> Conversation | None:
    """`conversation_get_for_user`, with `live_marks` on the row (as text; ``live_paused`` true
    or false as the database says it): one query."""
    return _with_live_marks(owner_id=user.pk, conversation_id=conversation_id)


def conversation_live_marks(conversation: Conversation) -> dict:
    """`live_marks` of ``conversation`` (one query); {} when it is gone."""
    row = _with_live_marks(owner_id=conversation.owner_id, conversation_id=conversation.pk)
    return {name: getattr(row, name) for name in (*LIVE_MARKS, "live_paused")} if row is not None else {}
