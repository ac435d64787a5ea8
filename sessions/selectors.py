"""Read-side queries, and nothing else (the figures made from them are `sessions.presenters`).
Every lookup of a conversation by a user goes through the owner check here."""
from __future__ import annotations

from django.db.models import Count, Exists, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from sessions.models import (
    ApiCall,
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
