"""Cache-aware compaction timing before a turn's first model call (the rules are
``compression.core.compaction_timing``'s; the settings are ``compression.idle_compaction*`` and
``compression.defer_horizon_turns``).

A conversation that returns after its prompt cache expired, large enough to compact soon, is
compacted now (trigger ``idle``), when the compaction costs no extra cache write; one that is
warm and near its threshold is left to compact at the next break or at the threshold, which the
feed reports once per session (a ``deferred`` event). Every decision that acts is an event with
its reason.
"""
from __future__ import annotations

from django.utils import timezone

from compression.core.caching import prompt_caching_status
from compression.core.compaction_timing import COMPACT, DEFER, TimingInput, longest_ttl_seconds, timing_decision
from sessions import live
from sessions.agent.context_checks import RequestContext, request_context
from sessions.models import ApiCall, CompressionEvent, Conversation, Session, Turn
from sessions.services import clock, pressure
from sessions.services.compaction import compression_inline
from sessions.services.context import context_messages

GROWTH_CALLS = 8  # the recent agent calls the growth per turn is read from
WITHIN_TURN_CALLS = 32  # the recent agent calls the growth within a turn is read from


def _growth_per_turn(conversation: Conversation, prompts: list[int]) -> float:
    """The request's recent growth per turn: per call over the session's last calls (``prompts``,
    newest first), times the conversation's calls per turn."""
    prompts = prompts[:GROWTH_CALLS]
    if len(prompts) < 2:
        return 0.0
    per_call = max(0.0, (prompts[0] - prompts[-1]) / (len(prompts) - 1))
    calls = ApiCall.objects.filter(conversation=conversation, purpose="agent").count()
    turns = Turn.objects.filter(conversation=conversation, status="done").count()
    return per_call * max(1.0, calls / max(1, turns))


def _growth_within_turn(recent: list[tuple[int, str]]) -> float | None:
    """How much the request grew within a turn, after its first call, averaged over the recent
    calls' turns (``recent``: prompt tokens and stop reason, oldest first): each call that follows
    a ``tool_use`` answer belongs to the same turn and adds what it grew by (the tool call and its
    result). None before two turns are seen."""
    grown = sum(max(0, after - before) for (before, stop), (after, _) in zip(recent, recent[1:]) if stop == "tool_use")
    turns = sum(stop != "tool_use" for _, stop in recent)  # a turn's last answer is not a tool_use
    return grown / turns if turns >= 2 else None


def timing_facts(conversation: Conversation, cfg, context: RequestContext) -> TimingInput:
    session = context.session
    status = prompt_caching_status(conversation.model, conversation.provider, "")
    last = session.last_call_at
    projected = pressure.projection_of(conversation, session, cfg, messages=context_messages(session),
                                       tools=context.tools).tokens
    # The session's recent agent calls, newest first: both growth figures are read from them.
    recent = list(ApiCall.objects.filter(session=session, purpose="agent", error="")
                  .order_by("-id").values_list("prompt_tokens", "stop_reason")[:WITHIN_TURN_CALLS])
    return TimingInput(
        now=clock.now(), last_call_at=last.timestamp() if last else None,
        ttl_seconds=longest_ttl_seconds(enabled=status.enabled, strategy=cfg.caching.strategy,
                                        cache_ttl=cfg.caching.cache_ttl),
        projected=projected, threshold=context.engine.threshold_tokens,
        growth_per_turn=_growth_per_turn(conversation, [p for p, _ in recent]),
        growth_within_turn=_growth_within_turn(recent[::-1]))


def _deferral_reported(session: Session) -> bool:
    return CompressionEvent.objects.filter(session=session, status="deferred").exists()


def cache_timing(conversation: Conversation, cfg, context: RequestContext) -> RequestContext:
    """Compact now when the cache is cold (the context to make the first call with, built anew),
    or report a deferral while it is warm; otherwise the context as it was."""
    c = cfg.compression
    if not (c.enabled and c.idle_compaction):
        return context
    decision = timing_decision(timing_facts(conversation, cfg, context), idle_share=c.idle_compaction_share,
                               horizon_turns=c.defer_horizon_turns, idle_when=c.idle_compaction_when)
    if decision.action == COMPACT:
        compression_inline(conversation_id=conversation.id, trigger="idle", reason=decision.reason)
        return request_context(conversation, cfg)
    if decision.action == DEFER and not _deferral_reported(context.session):
        event = CompressionEvent.objects.create(
            conversation=conversation, session=context.session, trigger="idle", status="deferred",
            reason=decision.reason, finished_at=timezone.now())
        live.compression_finished(event)
    return context
