"""The figures the pages show, computed once for the page view and the live push alike: the
context gauge, the prompt-cache panel and its chart, the home page's and the sidebar's rows, and
the one rule for a gauge's level, one list-row pressure and one bar geometry that the staff
dashboard uses too.

Presenters read through `sessions.selectors` (queries only) and return plain dictionaries for
the templates; they never write.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace

from compression.core.breakdown import context_breakdown
from compression.core.caching import prompt_caching_status
from compression.core.compressor_state import ANTI_THRASH_LIMIT
from compression.core.hygiene import hygiene_threshold
from compression.core.projection import LEVEL_LABELS, pressure_level, ratio_of, tool_schema_tokens, turn_growth
from compression.core.registry import BUILTIN_ENGINE, LCM_ENGINE
from llm.models import model_label
from sessions import selectors
from sessions.models import Conversation, Session
from sessions.services import pressure, runtime
from sessions.services.context import SYSTEM_PROMPT, context_rows
from sessions.services.mcp import SCHEMA_SHARE_WARNING

CHART_HEIGHT = 60  # px of the tallest bar
CHART_BASE = 64  # y of the bars' baseline in the SVG
BAR_WIDTH = 10


# The same levels in a word, for a list row (the sidebar).
LEVEL_WORDS = {"none": "unused", "ok": "low", "warn": "rising", "high": "high", "critical": "critical"}


def pressures(conversations, sessions: dict, cfg) -> dict:
    """{conversation id: its context pressure for a list row}: the projected next request (SPEC
    §3.4) against the window and threshold, the same figures the gauge shows, without building an
    engine or reading the messages (their stored counts are summed by the database). The sidebar
    and the staff dashboard use it."""
    conversations = list(conversations)
    projections = pressure.rows_projection(conversations, sessions, cfg)
    out = {}
    for c in conversations:
        session = sessions.get(c.id) or Session(conversation=c)
        window = runtime.session_window(c, session, cfg)
        rule = pressure.threshold_of(c, session, cfg)
        tokens = pressure.shown_tokens(*projections[c.id])
        out[c.id] = {"window": window, "threshold": rule.tokens, "tokens": tokens, "autoraised": rule.decision.raised,
                     "level": pressure_level(tokens, rule.tokens, window)}
    return out


def sidebar_rows(conversations, *, cfg, current_id=None) -> list[dict]:
    """A row per conversation of the sidebar: title, model, pressure in per cent and in a word.
    Four queries however many rows."""
    conversations = list(conversations)
    sessions = selectors.active_sessions_by_conversation([c.id for c in conversations])
    found = pressures(conversations, sessions, cfg)
    rows = []
    for conversation in conversations:
        p = found[conversation.id]
        rows.append({"c": conversation, "model_label": model_label(conversation.model),
                     "pct": round(100.0 * p["tokens"] / p["window"]) if p["window"] else 0, "level": p["level"],
                     "level_word": LEVEL_WORDS[p["level"]], "current": str(conversation.id) == str(current_id)})
    return rows


def bar(value: float, peak: float, *, height: float = CHART_HEIGHT, base: float = CHART_BASE) -> tuple[float, float]:
    """(height, y) of a bar for `value` on a chart whose tallest bar is `peak`."""
    h = round(height * value / (peak or 1), 1)
    return h, round(base - h, 1)


@dataclass(frozen=True)
class GaugeFigures:
    """What the agent loop already holds after a model call, for the gauge it pushes: the session
    (its real prompt and counted size just saved), the next request's messages (system prompt
    first, each with its stored token count), the tools offered with it, and what its engine says
    (``blocked``). ``ids``: the messages' ids (None for the system prompt), read in one query when
    not given; ``ratio``: the model's measured ratio, read when not given."""

    session: Session
    messages: list[dict]
    offered: pressure.OfferedTools
    blocked: str | None = None
    ids: list | None = None
    ratio: float | None = None


def gauge(conversation: Conversation, *, cfg=None, figures: GaugeFigures | None = None) -> dict:
    """The context gauge: the projected next request (SPEC §3.4) against the window, the threshold
    and gateway hygiene, the last real size beside it, and the level the triggers will act on.
    From ``figures`` when the caller has them (no engine, no message read), else from the database
    (no engine either, unless the session's stored state says compression may be paused)."""
    cfg = cfg or runtime.current_config()
    if figures is None:
        figures = _figures_read(conversation, cfg)
    session, messages, offered = figures.session, figures.messages, figures.offered
    ids = figures.ids if figures.ids is not None else _context_ids(session, len(messages))
    ratio = figures.ratio
    if ratio is None:
        ratio = pressure.ratios([conversation.model]).get(conversation.model, ratio_of(0, 0))
    window = runtime.session_window(conversation, session, cfg)
    rule = pressure.threshold_of(conversation, session, cfg)
    threshold = rule.tokens
    tools = offered.all
    sizes = [pressure.message_size(m) for m in messages]  # counted once, for the projection and the growth
    projection = pressure.project(session, counted=sum(sizes) + tool_schema_tokens(tools), ratio=ratio)
    tokens = pressure.shown_tokens(projection, len(messages) - 1)
    growth = round(turn_growth(messages, sizes) * projection.ratio)
    level = pressure_level(tokens, threshold, window, growth=growth) if tokens else "none"
    pct = min(100.0, 100.0 * tokens / window) if window else 0.0
    mcp_tokens = round(sum(tool_schema_tokens(server.schemas) for server in offered.mcp) * projection.ratio)
    mcp_warning = ""
    if window and mcp_tokens > SCHEMA_SHARE_WARNING * window:
        mcp_warning = (f"The MCP servers' tool schemas take ≈ {mcp_tokens:,} tokens, {100.0 * mcp_tokens / window:.0f}% of "
                       "the window, before the first message. Switch off the servers this conversation does not need.")
    return {"tokens": tokens, "last_real": projection.last_real, "basis": projection.basis,
            "ratio": round(projection.ratio, 3), "growth": growth, "window": window, "threshold": threshold,
            "pct": round(pct, 1), "threshold_pct": round(100.0 * threshold / window, 1),
            "hygiene_pct": round(100.0 * hygiene_threshold(window) / window, 1),
            "level": level, "level_label": LEVEL_LABELS[level],
            "compressions": session.compression_count, "enabled": cfg.compression.enabled,
            "conversation_id": conversation.id, "blocked": figures.blocked if cfg.compression.enabled else None,
            "lowered_to_aux": rule.lowered_to, "mcp_tokens": mcp_tokens, "mcp_warning": mcp_warning,
            "breakdown": breakdown(messages, ids, tools=offered.by_source,
                                   window=window, reserve=conversation.max_tokens or 0, total=tokens)}


def _figures_read(conversation: Conversation, cfg) -> GaugeFigures:
    """The gauge's figures from the database: the active session with the model's ratio, its
    context (one query each) and the offered tools (the MCP servers' one). The engine's tools are
    its kind's (the same for every conversation under ``cfg``); an engine is built only to ask why
    compression is paused when the session's stored state says it may be."""
    session, sums = selectors.session_active_with_ratio(conversation)
    rows = list(context_rows(session)) if session.pk else []
    messages = [{"role": "system", "content": session.system_prompt or SYSTEM_PROMPT}, *(r.as_chat() for r in rows)]
    engine, blocked = None, None
    if cfg.compression.enabled and not _quiet(session, cfg):
        try:
            engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
            blocked = engine.blocked_reason()
        except runtime.ConfigurationProblem:
            pass
    offered = pressure.offered_tools(cfg, engine or _tools_engine(cfg),
                                     conversation)
    return GaugeFigures(session=session, messages=messages, offered=offered, blocked=blocked,
                        ids=[None, *(r.id for r in rows)], ratio=ratio_of(*sums))


def _quiet(session: Session, cfg) -> bool:
    """Whether a built-in engine restored from ``session`` can only say that nothing pauses
    compression: no cooldown stored and fewer ineffective compactions than pause it."""
    return (cfg.context.engine in (BUILTIN_ENGINE, LCM_ENGINE) and not session.cooldown_until
            and session.ineffective_count < ANTI_THRASH_LIMIT)


def _tools_engine(cfg):
    """An engine only to list its tools: a built-in kind's is built once per process (it is never
    asked anything else); a plugin's as ``runtime.engine_for_tools`` builds it, each time."""
    if cfg.context.engine in (BUILTIN_ENGINE, LCM_ENGINE):
        return _builtin_tools_engine(cfg.context.engine, bool(cfg.context.recall_tools))
    return runtime.engine_for_tools(cfg)


@functools.lru_cache(maxsize=4)
def _builtin_tools_engine(kind: str, recall_tools: bool):
    return runtime.engine_for_tools(SimpleNamespace(context=SimpleNamespace(engine=kind, recall_tools=recall_tools)))


def _context_ids(session: Session, count: int) -> list:
    """The ids of the session's context messages, for the breakdown's links (none when the
    context changed since the messages were read)."""
    ids = list(context_rows(session).values_list("id", flat=True)) if session.pk else []
    return [None, *ids] if len(ids) == count - 1 else [None] * count


def breakdown(messages: list[dict], ids: list, *, tools: dict, window: int, reserve: int, total: int) -> dict:
    """Where the context goes, by kind, scaled to the shown total, and its five largest items."""
    b = context_breakdown(messages, tools_by_source=tools, window=window, output_reserve=reserve,
                          total=total or None, refs=ids)
    parts = [{"kind": p.kind, "slug": p.slug, "label": p.label, "tokens": p.tokens, "pct": p.pct, "x": p.x}
             for p in b.parts]
    largest = [{"label": i.label, "tokens": i.tokens, "anchor": f"msg-{i.ref}" if i.ref else "", "preview": i.preview}
               for i in b.largest]
    return {"total": total, "window": window, "estimated": b.estimated, "parts": parts, "largest": largest}


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def cache_panel(conversation: Conversation, *, cfg=None) -> dict:
    cfg = cfg or runtime.current_config()
    totals, recent = selectors.api_calls_panel(conversation)
    prompt = totals["prompt"] or 0
    last = recent[-1] if recent else None
    status = prompt_caching_status(conversation.model, conversation.provider, "")
    peak = max([c.prompt_tokens for c in recent] or [1]) or 1
    bars = []
    for i, c in enumerate(recent):
        h, y = bar(c.prompt_tokens, peak)
        read_h, read_y = bar(c.cache_read_tokens, peak)
        first_of_child = c.session is not None and c.session.parent_id is not None and (
            i == 0 or recent[i - 1].session_id != c.session_id)
        bars.append({"x": i * BAR_WIDTH, "h": h, "y": y, "read_h": read_h, "read_y": read_y,
                     "prompt": c.prompt_tokens, "read": c.cache_read_tokens, "compressed": first_of_child})
    return {
        "calls": totals["n"] or 0, "prompt": prompt, "read": totals["read"] or 0, "write": totals["write"] or 0,
        "write_5m": totals["w5"] or 0, "write_1h": totals["w1h"] or 0,
        "hit_rate": _pct(totals["read"] or 0, prompt),
        "last_hit_rate": _pct(last.cache_read_tokens, last.prompt_tokens) if last else 0.0,
        "cost": totals["agent_cost"] or 0, "saved": (totals["nocache"] or 0) - (totals["agent_cost"] or 0),
        "summariser_cost": totals["summariser_cost"] or 0,
        "status_label": status.label(cfg.caching.cache_ttl, cfg.caching.strategy), "enabled": status.enabled, "bars": bars,
        "chart_width": max(BAR_WIDTH, len(bars) * BAR_WIDTH),
    }


def conversation_rows(conversations, *, cfg=None) -> list[dict]:
    """The home page: title, model, context usage, compressions, cache hit rate, last activity, in
    a fixed number of queries however many conversations there are."""
    conversations = list(conversations)
    cfg = cfg or runtime.current_config()
    ids = [c.id for c in conversations]
    sessions = selectors.active_sessions_by_conversation(ids)
    found = pressures(conversations, sessions, cfg)
    hits = selectors.api_call_totals_by_conversation(ids)
    rows = []
    for c in conversations:
        p = found[c.id]
        prompt, read = hits.get(c.id, (0, 0))
        rows.append({"c": c, "model_label": model_label(c.model), "usage_pct": _pct(p["tokens"], p["window"]),
                     "compressions": c.compressions, "hit_rate": _pct(read, prompt) if prompt else None})
    return rows
