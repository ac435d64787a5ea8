"""Read-side queries for the staff dashboard and /metrics, across every user's conversations.

Guarantees: every figure is a database aggregate (COUNT/SUM, grouped by status, trigger or day);
no query walks messages, and per-conversation rows are limited to ``PRESSURE_LIMIT`` conversations
(three queries however many there are). Cache figures use the same definition as the conversation
page: agent calls without error, hit rate = Σ cache_read / Σ prompt (token-weighted), saved =
Σ cost_without_cache − Σ cost.
"""
from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from compression.core.compressor_state import ANTI_THRASH_LIMIT
from compression.core.projection import tool_schema_tokens
from compression.models import MCPServer, SettingsChange
from sessions.models import ApiCall, CompressionEvent, Conversation, Session
from sessions.presenters import LEVEL_WORDS, bar, pressures
from sessions.selectors import active_sessions_by_conversation
from sessions.services.feasibility import feasibility
from sessions.services.limits_usage import usage_overview
from sessions.services.mcp import servers_offered
from sessions.services.runtime import current_config

PRESSURE_LIMIT = 200
FLAGGED_LIMIT = 50
DAYS = 30
STATUSES = tuple(s for s, _ in CompressionEvent.STATUS)
TRIGGERS = tuple(t for t, _ in CompressionEvent.TRIGGERS)
FAILED_STATUSES = ("failed",)  # summary failures are recorded as failed (SPEC §6)

_ZERO = Decimal(0)


def _agent_calls():
    return ApiCall.objects.filter(purpose="agent", error="")


# --- Totals -------------------------------------------------------------------------------------


def compression_counts() -> dict[tuple[str, str], int]:
    """{(status, trigger): number of events}, one GROUP BY query."""
    rows = CompressionEvent.objects.order_by().values("status", "trigger").annotate(n=Count("id"))
    return {(r["status"], r["trigger"]): r["n"] for r in rows}


def compression_summary(counts: dict[tuple[str, str], int]) -> dict:
    by_status = dict.fromkeys(STATUSES, 0)
    by_trigger = {t: dict.fromkeys(STATUSES, 0) for t in TRIGGERS}
    for (status, trigger), n in counts.items():
        by_status[status] = by_status.get(status, 0) + n
        by_trigger.setdefault(trigger, dict.fromkeys(STATUSES, 0))[status] = by_trigger[trigger].get(status, 0) + n
    return {
        "by_status": by_status,
        "rows": [{"trigger": t, "counts": [by_trigger[t].get(s, 0) for s in by_status],
                  "total": sum(by_trigger[t].values())} for t in by_trigger],
        "statuses": list(by_status),
        "total": sum(by_status.values()),
        "failures": sum(by_status.get(s, 0) for s in FAILED_STATUSES),
    }


def session_flags(*, now: float | None = None) -> dict:
    """Active sessions in total, in a cooldown (cooldown_until > now, unix seconds) and anti-thrash blocked."""
    now = time.time() if now is None else now
    return Session.objects.filter(ended_at__isnull=True).aggregate(
        active=Count("id"),
        cooldown=Count("id", filter=Q(cooldown_until__gt=now)),
        antithrash=Count("id", filter=Q(ineffective_count__gte=ANTI_THRASH_LIMIT)),
    )


def flagged_sessions(*, now: float | None = None, limit: int = FLAGGED_LIMIT) -> list[dict]:
    """Active sessions in a cooldown or anti-thrash blocked, newest first."""
    now = time.time() if now is None else now
    rows = (Session.objects.filter(ended_at__isnull=True)
            .filter(Q(cooldown_until__gt=now) | Q(ineffective_count__gte=ANTI_THRASH_LIMIT))
            .select_related("conversation__owner").order_by("-id")[:limit])
    return [{"session": s, "conversation": s.conversation, "owner": s.conversation.owner.get_username(),
             "cooldown_left": max(1, int(s.cooldown_until - now)) if (s.cooldown_until or 0) > now else 0,
             "blocked": s.ineffective_count >= ANTI_THRASH_LIMIT} for s in rows]


def cache_totals() -> dict:
    t = _agent_calls().aggregate(prompt=Sum("prompt_tokens"), read=Sum("cache_read_tokens"),
                                 write=Sum("cache_write_tokens"), cost=Sum("cost"),
                                 nocache=Sum("cost_without_cache"), calls=Count("id"))
    prompt, read = t["prompt"] or 0, t["read"] or 0
    cost, nocache = t["cost"] or _ZERO, t["nocache"] or _ZERO
    by_purpose = {r["purpose"]: {"cost": r["cost"] or _ZERO, "calls": r["calls"]}
                  for r in ApiCall.objects.order_by().values("purpose").annotate(cost=Sum("cost"), calls=Count("id"))}
    return {
        "calls": t["calls"] or 0, "prompt": prompt, "read": read, "write": t["write"] or 0,
        "hit_ratio": read / prompt if prompt else 0.0,
        "hit_rate": round(100.0 * read / prompt, 1) if prompt else 0.0,
        "cost": cost, "cost_without_cache": nocache, "saved": nocache - cost,
        "by_purpose": by_purpose,
        "total_cost": sum((p["cost"] for p in by_purpose.values()), _ZERO),
    }


# --- Per day ------------------------------------------------------------------------------------


def daily(*, days: int = DAYS, today: dt.date | None = None) -> list[dict]:
    """The last ``days`` days (oldest first, empty days included): agent prompt/read tokens, cost,
    savings and compressions by status, aggregated in the database by TruncDate."""
    today = today or timezone.localdate()
    first = today - dt.timedelta(days=days - 1)
    start = dt.datetime.combine(first, dt.time.min, tzinfo=timezone.get_current_timezone())
    out = {first + dt.timedelta(days=i): {"day": first + dt.timedelta(days=i), "prompt": 0, "read": 0, "calls": 0,
                                          "cost": _ZERO, "saved": _ZERO, "compressed": 0, "failed": 0, "other": 0}
           for i in range(days)}
    calls = (_agent_calls().filter(created_at__gte=start).annotate(day=TruncDate("created_at")).order_by()
             .values("day").annotate(prompt=Sum("prompt_tokens"), read=Sum("cache_read_tokens"), calls=Count("id"),
                                     cost=Sum("cost"), nocache=Sum("cost_without_cache")))
    for r in calls:
        row = out.get(r["day"])
        if row is not None:
            row.update(prompt=r["prompt"] or 0, read=r["read"] or 0, calls=r["calls"], cost=r["cost"] or _ZERO,
                       saved=(r["nocache"] or _ZERO) - (r["cost"] or _ZERO))
    events = (CompressionEvent.objects.filter(started_at__gte=start).annotate(day=TruncDate("started_at"))
              .order_by().values("day", "status").annotate(n=Count("id")))
    for r in events:
        row = out.get(r["day"])
        if row is not None:
            status = r["status"]
            row["compressed" if status == "compressed" else "failed" if status in FAILED_STATUSES else "other"] += r["n"]
    rows = list(out.values())
    for row in rows:
        row["hit_rate"] = round(100.0 * row["read"] / row["prompt"], 1) if row["prompt"] else 0.0
    return rows


def daily_chart(rows: list[dict]) -> dict:
    """Bar geometry for the inline SVGs: tokens (prompt, cache read) and compressions per day."""
    peak_tokens = max([r["prompt"] for r in rows] or [0]) or 1
    peak_events = max([r["compressed"] + r["failed"] + r["other"] for r in rows] or [0]) or 1
    bars = []
    for i, r in enumerate(rows):
        h, y = bar(r["prompt"], peak_tokens)
        read_h, read_y = bar(r["read"], peak_tokens)
        # The compressions chart stacks its three bars on a 40 px baseline, 36 px at most.
        ok_h, ok_y = bar(r["compressed"], peak_events, height=36, base=40)
        bad_h, bad_y = bar(r["failed"], peak_events, height=36, base=ok_y)
        other_h, other_y = bar(r["other"], peak_events, height=36, base=bad_y)
        bars.append({**r, "x": i * 10, "h": h, "y": y, "read_h": read_h, "read_y": read_y,
                     "ok_h": ok_h, "ok_y": ok_y, "bad_h": bad_h, "bad_y": bad_y, "other_h": other_h, "other_y": other_y})
    return {"bars": bars, "width": max(10, len(bars) * 10), "peak_tokens": peak_tokens, "peak_events": peak_events}


# --- Per conversation ---------------------------------------------------------------------------


def conversation_pressure(*, cfg, now: float | None = None, limit: int = PRESSURE_LIMIT) -> dict:
    """The ``limit`` most recently active conversations with their active session's projected next
    request (SPEC §3.4) against its window and threshold, highest pressure first. Five queries."""
    now = time.time() if now is None else now
    conversations = list(Conversation.objects.select_related("owner").order_by("-last_activity_at")[:limit])
    ids = [c.id for c in conversations]
    sessions = active_sessions_by_conversation(ids)
    compressions = dict(CompressionEvent.objects.filter(conversation_id__in=ids, status="compressed").order_by()
                        .values_list("conversation_id").annotate(n=Count("id")))
    found = pressures(conversations, sessions, cfg)
    rows = []
    for conv in conversations:
        session = sessions.get(conv.id) or Session(conversation=conv)
        p = found[conv.id]
        window, threshold, tokens = p["window"], p["threshold"], p["tokens"]
        pct = round(100.0 * tokens / window, 1) if window else 0.0
        cooling = session.cooldown_until is not None and session.cooldown_until > now
        rows.append({
            "conversation": conv, "owner": conv.owner.get_username(), "tokens": tokens, "window": window,
            "threshold": threshold, "pct": pct, "bar_pct": min(pct, 100.0),
            "threshold_pct": round(100.0 * threshold / window, 1) if window else 0.0,
            "level": p["level"], "awaiting_usage": session.last_prompt_tokens < 0,
            "compressions": compressions.get(conv.id, 0),
            "cooldown_left": max(1, int(session.cooldown_until - now)) if cooling else 0,
            "blocked": session.ineffective_count >= ANTI_THRASH_LIMIT,
            "autoraised": p["autoraised"],
        })
    rows.sort(key=lambda r: (r["pct"], r["conversation"].last_activity_at), reverse=True)
    return {"rows": rows, "total": Conversation.objects.count(), "limit": limit}


# --- Everything ---------------------------------------------------------------------------------


def pressure_levels(*, cfg) -> dict:
    """{level: how many of the most recently active conversations are at it}, on the same
    projection the gauge shows."""
    levels = dict.fromkeys(LEVEL_WORDS, 0)
    for row in conversation_pressure(cfg=cfg)["rows"]:
        levels[row["level"]] += 1
    return levels


def metrics_snapshot(*, now: float | None = None, cfg=None) -> dict:
    """The figures /metrics exposes (no per-conversation rows)."""
    return {
        "pressure": pressure_levels(cfg=cfg or current_config()),
        "compressions": compression_counts(),
        "sessions": session_flags(now=now),
        "cache": cache_totals(),
        "conversations": Conversation.objects.count(),
        "usage": usage_overview(),
    }


AUX_FAILURE_WINDOW = dt.timedelta(days=1)


AUX_STREAK_LOOKBACK = 20
SUMMARISING_STATUSES = ("compressed", "failed")  # the compressions that called a summariser


def auxiliary_failures(*, limit: int = 5) -> dict:
    """Compressions of the last day whose auxiliary summariser failed (the main model stood in):
    the sign of a misconfigured auxiliary route. ``streak``: how many of the installation's latest
    summarising compressions in a row fell back (up to ``AUX_STREAK_LOOKBACK``); ``changed_since``:
    the auxiliary settings were saved after the latest fallback (the next compression will tell).
    Four queries at most."""
    recent = CompressionEvent.objects.filter(started_at__gte=timezone.now() - AUX_FAILURE_WINDOW).exclude(aux_failure="")
    latest = list(recent.order_by("-id")[:limit])
    streak = 0
    for failure in (CompressionEvent.objects.filter(status__in=SUMMARISING_STATUSES).order_by("-id")
                    .values_list("aux_failure", flat=True)[:AUX_STREAK_LOOKBACK]):
        if not failure:
            break
        streak += 1
    changed_since = bool(latest) and SettingsChange.objects.filter(group="auxiliary",
                                                                   at__gt=latest[0].started_at).exists()
    return {"count": recent.count() if latest else 0, "latest": latest, "streak": streak,
            "changed_since": changed_since}


def mcp_servers() -> list[dict]:
    """Each MCP server as the workers last reported it: connected or not, its offered tools and
    their schema tokens, the last error and the last call's latency (one query)."""
    rows = list(MCPServer.objects.all())
    offered = {s.id: s for s in servers_offered(servers=[r for r in rows if r.enabled])}
    out = []
    for row in rows:
        schemas = offered[row.id].schemas if row.id in offered else []
        out.append({"server": row, "state": row.state if row.enabled else "disabled", "tools": len(schemas),
                    "listed": len(row.tools or []), "schema_tokens": tool_schema_tokens(schemas)})
    return out


def dashboard(*, cfg, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    days = daily()
    return {
        "pressure": conversation_pressure(cfg=cfg, now=now),
        "compressions": compression_summary(compression_counts()),
        "sessions": session_flags(now=now),
        "flagged": flagged_sessions(now=now),
        "cache": cache_totals(),
        "days": days,
        "chart": daily_chart(days),
        "feasibility": feasibility(cfg),
        "aux_failures": auxiliary_failures(),
        "mcp_servers": mcp_servers(),
        "usage": usage_overview(),
    }
