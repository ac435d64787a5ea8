"""Read-side queries, and nothing else (the figures made from them are `sessions.presenters`).
Every lookup of a conversation by a user goes through the owner check here."""
from __future__ import annotations

from django.db.models import Count, Q, Sum

from sessions.models import ApiCall, CompressionEvent, Conversation, Message, Session, Turn

TRANSCRIPT_LIMIT = 500
RECENT_CALLS = 40


def conversation_get_for_user(*, user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(id=conversation_id, owner=user).first()


def conversation_list_for_user(*, user):
    return (Conversation.objects.filter(owner=user).order_by("-last_activity_at")
            .annotate(compressions=Count("compression_events", filter=Q(compression_events__status="compressed"))))


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


def turn_latest(conversation: Conversation) -> Turn | None:
    return conversation.turns.order_by("-id").first()


def session_active_get(conversation: Conversation) -> Session:
    """The active session, or an unsaved empty one for a conversation that has none (no write)."""
    session = conversation.sessions.filter(ended_at__isnull=True).order_by("-id").first()
    return session or Session(conversation=conversation)


def api_call_totals(conversation: Conversation) -> dict:
    """Sums over the conversation's successful agent calls, and what its summariser calls cost."""
    agent = Q(purpose="agent", error="")
    return ApiCall.objects.filter(conversation=conversation).aggregate(
        prompt=Sum("prompt_tokens", filter=agent), read=Sum("cache_read_tokens", filter=agent),
        write=Sum("cache_write_tokens", filter=agent), w5=Sum("cache_write_5m_tokens", filter=agent),
        w1h=Sum("cache_write_1h_tokens", filter=agent), agent_cost=Sum("cost", filter=agent),
        nocache=Sum("cost_without_cache", filter=agent), n=Count("id", filter=agent),
        summariser_cost=Sum("cost", filter=Q(purpose="compression")))


def api_calls_recent(conversation: Conversation, limit: int = RECENT_CALLS) -> list[ApiCall]:
    """The last `limit` successful agent calls, oldest first, with their sessions."""
    rows = list(ApiCall.objects.filter(conversation=conversation, purpose="agent", error="")
                .select_related("session").order_by("-id")[:limit])
    rows.reverse()
    return rows


def active_sessions_by_conversation(ids) -> dict:
    sessions: dict = {}
    for s in Session.objects.filter(conversation_id__in=ids, ended_at__isnull=True).order_by("id"):
        sessions[s.conversation_id] = s  # the newest active session wins
    return sessions


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
