"""The figures the pages show, computed once for the page view and the live push alike: the
context gauge, the prompt-cache panel and its chart, the home page's and the sidebar's rows, and
the one rule for a gauge's level, one list-row pressure and one bar geometry that the staff
dashboard uses too.

Presenters read through `sessions.selectors` (queries only) and return plain dictionaries for
the templates; they never write.
"""
from __future__ import annotations

from compression.core.caching import prompt_caching_status
from compression.core.hygiene import hygiene_threshold
from compression.core.thresholds import compute_threshold_tokens, resolve_threshold
from compression.core.tokens import estimate_messages_tokens_rough
from llm.models import model_label
from sessions import selectors
from sessions.models import Conversation, Session
from sessions.services import runtime
from sessions.services.context import context_messages

CHART_HEIGHT = 60  # px of the tallest bar
CHART_BASE = 64  # y of the bars' baseline in the SVG
BAR_WIDTH = 10


# The level in words, so the gauge reads without its colours.
LEVEL_LABELS = {"none": "Empty", "ok": "OK", "warn": "Nearing the compression threshold",
                "high": "Over the compression threshold", "critical": "Critical: past gateway hygiene (85 %)"}


def gauge_level(tokens: int, threshold: int, window: int) -> str:
    """none (nothing sent yet) · ok (< 80 % of the threshold) · warn (below the threshold) ·
    high (at the threshold, below gateway hygiene's 85 %) · critical."""
    if tokens <= 0:
        return "none"
    if tokens < 0.8 * threshold:
        return "ok"
    if tokens < threshold:
        return "warn"
    return "high" if tokens < hygiene_threshold(window) else "critical"


# The same levels in a word, for a list row (the sidebar).
LEVEL_WORDS = {"none": "unused", "ok": "low", "warn": "rising", "high": "high", "critical": "critical"}


def pressure(conversation: Conversation, session: Session, cfg) -> dict:
    """A conversation's context pressure for a list row, without building its engine: the active
    session's last real prompt against its window and threshold (the configured one, lowered to
    the auxiliary window when the session says so). The sidebar and the staff dashboard use it."""
    window = runtime.session_window(conversation, session, cfg)
    c = cfg.compression
    decision = resolve_threshold(c.threshold, provider=conversation.provider, model=conversation.model,
                                 codex_autoraise=c.codex_gpt55_autoraise, codex_autoraise_notice=False)
    threshold = compute_threshold_tokens(window, decision.threshold, conversation.max_tokens)
    if session.threshold_tokens and session.threshold_tokens < threshold:
        threshold = session.threshold_tokens  # lowered to the aux window
    tokens = max(session.last_prompt_tokens, 0)  # -1: compressed, waiting for real usage
    return {"window": window, "threshold": threshold, "tokens": tokens, "autoraised": decision.raised,
            "level": gauge_level(tokens, threshold, window)}


def sidebar_rows(conversations, *, cfg, current_id=None) -> list[dict]:
    """A row per conversation of the sidebar: title, model, pressure in per cent and in a word.
    Two queries however many rows."""
    conversations = list(conversations)
    sessions = selectors.active_sessions_by_conversation([c.id for c in conversations])
    rows = []
    for conversation in conversations:
        p = pressure(conversation, sessions.get(conversation.id) or Session(conversation=conversation), cfg)
        rows.append({"c": conversation, "model_label": model_label(conversation.model),
                     "pct": round(100.0 * p["tokens"] / p["window"]) if p["window"] else 0, "level": p["level"],
                     "level_word": LEVEL_WORDS[p["level"]], "current": str(conversation.id) == str(current_id)})
    return rows


def bar(value: float, peak: float, *, height: float = CHART_HEIGHT, base: float = CHART_BASE) -> tuple[float, float]:
    """(height, y) of a bar for `value` on a chart whose tallest bar is `peak`."""
    h = round(height * value / (peak or 1), 1)
    return h, round(base - h, 1)


def gauge(conversation: Conversation, *, cfg=None) -> dict:
    cfg = cfg or runtime.current_config()
    session = selectors.session_active_get(conversation)
    window = runtime.session_window(conversation, session, cfg)
    lowered = blocked = engine = None
    try:
        engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
        threshold = engine.threshold_tokens
        lowered = engine.lowered_to_aux_window
        blocked = engine.blocked_reason() if cfg.compression.enabled else None
    except runtime.ConfigurationProblem:
        threshold = window
    if session.last_prompt_tokens > 0:
        tokens, source = session.last_prompt_tokens, "real"
    elif session.pk is None:  # nothing stored yet
        tokens, source = 0, "estimated"
    else:
        # The stored per-message counts, as the agent loop and the compression event count them,
        # so the gauge right after a compaction shows the event's figure.
        messages = context_messages(session)
        tokens = engine.count_messages_tokens(messages) if engine else estimate_messages_tokens_rough(messages)
        source = "estimated"
    pct = min(100.0, 100.0 * tokens / window) if window else 0.0
    level = gauge_level(tokens, threshold, window)
    return {"tokens": tokens, "source": source, "window": window, "threshold": threshold, "pct": round(pct, 1),
            "threshold_pct": round(100.0 * threshold / window, 1),
            "hygiene_pct": round(100.0 * hygiene_threshold(window) / window, 1),
            "level": level, "level_label": LEVEL_LABELS[level],
            "compressions": session.compression_count, "enabled": cfg.compression.enabled,
            "conversation_id": conversation.id, "blocked": blocked, "lowered_to_aux": lowered}


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def cache_panel(conversation: Conversation, *, cfg=None) -> dict:
    cfg = cfg or runtime.current_config()
    totals = selectors.api_call_totals(conversation)
    recent = selectors.api_calls_recent(conversation)
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
        "status_label": status.label(cfg.caching.cache_ttl), "enabled": status.enabled, "bars": bars,
        "chart_width": max(BAR_WIDTH, len(bars) * BAR_WIDTH),
    }


def conversation_rows(conversations, *, cfg=None) -> list[dict]:
    """The home page: title, model, context usage, compressions, cache hit rate, last activity, in
    a fixed number of queries however many conversations there are."""
    conversations = list(conversations)
    cfg = cfg or runtime.current_config()
    ids = [c.id for c in conversations]
    sessions = selectors.active_sessions_by_conversation(ids)
    hits = selectors.api_call_totals_by_conversation(ids)
    rows = []
    for c in conversations:
        session = sessions.get(c.id)
        window = runtime.model_window(c, cfg)
        used = session.last_prompt_tokens if session and session.last_prompt_tokens > 0 else 0
        prompt, read = hits.get(c.id, (0, 0))
        rows.append({"c": c, "model_label": model_label(c.model), "usage_pct": _pct(used, window),
                     "compressions": c.compressions, "hit_rate": _pct(read, prompt) if prompt else None})
    return rows
