"""Read-side queries. Every lookup of a conversation goes through the owner check here."""
from __future__ import annotations

from django.db.models import Count, Q, Sum

from sessions.models import ApiCall, CompressionEvent, Conversation, Message, Turn

TRANSCRIPT_LIMIT = 500


def conversation_get_for_user(*, user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(id=conversation_id, owner=user).first()


def conversation_list_for_user(*, user):
    return (Conversation.objects.filter(owner=user).order_by("-last_activity_at")
            .annotate(compressions=Count("compression_events", filter=Q(compression_events__status="compressed"))))


def live_state_html(*, conversation: Conversation) -> str:
    """The live panels rendered from the database, sent to a socket on (re)connect."""
    from sessions import fragments

    return fragments.render_live_state(conversation)


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


def transcript_entry(message: Message) -> dict:
    entry = {"id": message.id, "role": message.role, "text": _text_of(message.content), "tool_calls": [],
             "is_summary": message.is_summary, "name": message.name, "event": None}
    for call in message.tool_calls or []:
        fn = call.get("function", {})
        entry["tool_calls"].append({"id": call.get("id", ""), "name": fn.get("name", ""), "arguments": fn.get("arguments", "")})
    if message.is_summary:
        entry["event"] = CompressionEvent.objects.filter(summary_message=message).first()
    return entry


def transcript(conversation: Conversation) -> list[dict]:
    """Visible messages in order (originals plus compaction dividers), the newest TRANSCRIPT_LIMIT."""
    rows = list(conversation.messages.filter(visible=True).order_by("-id")[:TRANSCRIPT_LIMIT])
    rows.reverse()
    return [transcript_entry(m) for m in rows]


def compression_events(conversation: Conversation, limit: int = 20):
    return list(conversation.compression_events.order_by("-id")[:limit])


def turn_latest(conversation: Conversation) -> Turn | None:
    return conversation.turns.order_by("-id").first()


def gauge(conversation: Conversation) -> dict:
    from compression.core.hygiene import hygiene_threshold
    from sessions.services import runtime
    from sessions.services.context import context_messages, session_active

    cfg = runtime.current_config()
    session = session_active(conversation)
    window = runtime.session_window(conversation, session, cfg)
    lowered = None
    try:
        engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
        threshold = engine.threshold_tokens
        lowered = getattr(engine, "lowered_to_aux_window", None)
    except runtime.ConfigurationProblem:
        threshold = window
    if session.last_prompt_tokens > 0:
        tokens, source = session.last_prompt_tokens, "real"
    else:
        from compression.core.tokens import estimate_messages_tokens_rough

        tokens, source = estimate_messages_tokens_rough(context_messages(session)), "estimated"
    pct = min(100.0, 100.0 * tokens / window) if window else 0.0
    threshold_pct = 100.0 * threshold / window
    hygiene_pct = 100.0 * hygiene_threshold(window) / window
    level = "ok" if tokens < 0.8 * threshold else "warn" if tokens < threshold else "high" if pct < hygiene_pct else "critical"
    return {"tokens": tokens, "source": source, "window": window, "threshold": threshold, "pct": round(pct, 1),
            "threshold_pct": round(threshold_pct, 1), "hygiene_pct": round(hygiene_pct, 1), "level": level,
            "compressions": session.compression_count, "enabled": cfg.compression.enabled, "conversation_id": conversation.id,
            "blocked": session.ineffective_count >= 2, "lowered_to_aux": lowered}


def cache_metrics(conversation: Conversation) -> dict:
    from compression.core.caching import prompt_caching_status
    from sessions.services import runtime

    calls = ApiCall.objects.filter(conversation=conversation, purpose="agent", error="")
    totals = calls.aggregate(prompt=Sum("prompt_tokens"), read=Sum("cache_read_tokens"), write=Sum("cache_write_tokens"),
                             w5=Sum("cache_write_5m_tokens"), w1h=Sum("cache_write_1h_tokens"), cost=Sum("cost"),
                             nocache=Sum("cost_without_cache"), n=Count("id"))
    prompt = totals["prompt"] or 0
    recent = list(calls.order_by("-id")[:40])
    recent.reverse()
    last = recent[-1] if recent else None
    summariser_cost = ApiCall.objects.filter(conversation=conversation, purpose="compression").aggregate(c=Sum("cost"))["c"] or 0
    cfg = runtime.current_config()
    status = prompt_caching_status(conversation.model, conversation.provider, "")
    peak = max([c.prompt_tokens for c in recent] or [1]) or 1
    session_starts = set(conversation.sessions.exclude(parent=None).values_list("id", flat=True))
    bars = []
    for i, c in enumerate(recent):
        h, read_h = round(60 * c.prompt_tokens / peak, 1), round(60 * c.cache_read_tokens / peak, 1)
        bars.append({"x": i * 10, "h": h, "y": round(64 - h, 1), "read_h": read_h, "read_y": round(64 - read_h, 1),
                     "prompt": c.prompt_tokens, "read": c.cache_read_tokens,
                     "compressed": c.session_id in session_starts and (i == 0 or recent[i - 1].session_id != c.session_id)})
    return {
        "calls": totals["n"] or 0, "prompt": prompt, "read": totals["read"] or 0, "write": totals["write"] or 0,
        "write_5m": totals["w5"] or 0, "write_1h": totals["w1h"] or 0,
        "hit_rate": round(100.0 * (totals["read"] or 0) / prompt, 1) if prompt else 0.0,
        "last_hit_rate": round(100.0 * last.cache_read_tokens / last.prompt_tokens, 1) if last and last.prompt_tokens else 0.0,
        "cost": totals["cost"] or 0, "saved": (totals["nocache"] or 0) - (totals["cost"] or 0), "summariser_cost": summariser_cost,
        "status_label": status.label(cfg.caching.cache_ttl), "enabled": status.enabled, "bars": bars,
        "chart_width": max(10, len(bars) * 10),
    }


def conversation_rows(conversations) -> list[dict]:
    """The list page: title, model, context usage, compressions, cache hit rate, last activity."""
    rows = []
    for c in conversations:
        session = c.sessions.filter(ended_at__isnull=True).order_by("-id").first()
        totals = ApiCall.objects.filter(conversation=c, purpose="agent", error="").aggregate(
            prompt=Sum("prompt_tokens"), read=Sum("cache_read_tokens"))
        window = c.context_length or _catalog_window(c.model)
        used = session.last_prompt_tokens if session and session.last_prompt_tokens > 0 else 0
        rows.append({"c": c, "usage_pct": round(100 * used / window, 1) if window else 0, "compressions": c.compressions,
                     "hit_rate": round(100 * (totals["read"] or 0) / totals["prompt"], 1) if totals["prompt"] else None})
    return rows


def _catalog_window(model: str) -> int:
    from llm.models import get_model

    info = get_model(model)
    return info.context_window if info else 200_000


def compaction_originals(event: CompressionEvent):
    """The messages a compaction replaced: the ended session's context (rotation) or the rows it
    archived (in place)."""
    if event.in_place:
        rows = event.session.messages.filter(archived=True)
        if event.summary_message_id:
            rows = rows.filter(id__lt=event.summary_message_id)
        return rows.order_by("seq")
    return event.session.messages.order_by("seq")
