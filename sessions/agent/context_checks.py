"""What each model call of a turn is made from, and the compression checks around the calls
(SPEC §5): the agent loop (`loop.py`) reads as the turn, these are its context steps.

- `RequestContext`: the active session, its context engine and the tools offered with the
  request, built once per model call from the session as it is then (`request_context`);
- `preflight`: before the turn's first model call (§5.2);
- `post_response_check`: after a response that called tools, once their results are in (§5.3);
- `request_parts` and `measured`: the request as sent (with its cache breakpoints), and the real
  prompt it cost against its counted size, the starting point of the next projection (§3.4).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from compression.core.caching import apply_cache_strategy, prompt_caching_status
from compression.core.compressor_state import AWAITING_USAGE
from compression.core.hygiene import MAX_PREFLIGHT_PASSES, made_progress, preflight_gate
from sessions.models import Conversation, Session
from sessions.services import clock, pressure, runtime
from sessions.services.compaction import compression_inline
from sessions.services.context import context_messages, session_active

log = logging.getLogger(__name__)

WARM_SECONDS = 240.0  # a 5m cache entry's life, less a minute for the request to reach the cache


@dataclass(frozen=True)
class RequestContext:
    session: Session
    engine: Any  # the session's ContextEngine, its state restored from the session
    offered: pressure.OfferedTools

    @property
    def tools(self) -> list[dict]:
        return self.offered.all


def request_context(conversation: Conversation, cfg) -> RequestContext:
    """The context of the next model call, from the active session as it is now."""
    session = session_active(conversation)
    engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
    return RequestContext(session, engine, pressure.offered_tools(cfg, engine, conversation))


def warn_tool_clashes(context: RequestContext) -> None:
    """An engine tool named like a workspace tool is not offered (the API refuses duplicate names)."""
    for clash in {t["name"] for t in pressure.engine_tool_schemas(context.engine)} - context.offered.engine_names:
        log.warning("context engine tool %r has the name of a workspace tool; it is not offered", clash)


def preflight(conversation: Conversation, cfg, context: RequestContext) -> RequestContext:
    """SPEC §5.2: the projected next request (§3.4) against the threshold, compressed up to 3 passes
    while each makes progress. The context to make the first call with (built anew after each
    compression)."""
    for _ in range(MAX_PREFLIGHT_PASSES):
        projected = _preflight_size(conversation, cfg, context)
        if projected is None:
            return context
        outcome = compression_inline(conversation_id=conversation.id, trigger="preflight", current_tokens=projected)
        context = request_context(conversation, cfg)
        e = outcome.event
        if not outcome.compressed or not made_progress(e.messages_before, e.messages_after, e.tokens_before,
                                                       e.tokens_after):
            return context
    return context


def _preflight_size(conversation: Conversation, cfg, context: RequestContext) -> int | None:
    """The projected next request when the preflight must compress it, else None: the cheap gate
    first, and nothing right after a compaction until real usage arrives."""
    engine, c = context.engine, cfg.compression
    messages = context_messages(context.session)
    threshold = engine.threshold_tokens
    if not preflight_gate(message_count=len(messages) - 1,
                          rough_message_tokens=engine.estimate_history_tokens(messages),
                          threshold_tokens=threshold, protect_first_n=c.protect_first_n,
                          protect_last_n=c.protect_last_n):
        return None
    projected = pressure.projection_of(conversation, context.session, cfg, messages=messages,
                                       tools=context.tools).tokens
    if projected < threshold or engine.should_defer_preflight_to_real_usage(projected):
        return None
    return projected


def post_response_check(conversation: Conversation, cfg, context: RequestContext, prompt_tokens: int | None) -> None:
    """SPEC §5.3: the real prompt of the response (``prompt_tokens``), with the tool results just
    appended projected on top of it (the request about to be sent); with no usage, the projection
    from the counted request, never 0. The engine is this call's: its state was saved with the
    response, and nothing since has changed it."""
    session = context.session
    session.refresh_from_db()
    projected = pressure.projection_of(conversation, session, cfg, messages=context_messages(session),
                                       tools=context.tools).tokens
    if context.engine.should_compress(max(prompt_tokens or 0, projected)):
        compression_inline(conversation_id=conversation.id, trigger="post_response")


def request_parts(messages: list[dict], tools: list[dict], cfg, conversation: Conversation,
                  session: Session | None = None) -> tuple[list[dict], list[dict] | None]:
    """Messages and tool schemas with the configured cache breakpoints (none when caching is off)."""
    status = prompt_caching_status(conversation.model, conversation.provider, "")
    if not status.enabled:
        return messages, tools
    # A context rebuilt by a compression is sent cold once: strategies may price that call differently.
    hints = {"after_compression": session is not None and session.last_prompt_tokens == AWAITING_USAGE,
             "warm": session is not None and cache_warm(session)}
    cached = apply_cache_strategy(messages, strategy=cfg.caching.strategy, cache_ttl=cfg.caching.cache_ttl,
                                  native_anthropic=status.native_layout, tools=tools, hints=hints)
    return cached.messages, cached.tools


def cache_warm(session: Session) -> bool:
    """Whether the session's last model call was recent enough that its 5m cache entries still
    live (with a margin for the request's own time)."""
    last = session.last_call_at
    return last is not None and clock.now() - last.timestamp() < WARM_SECONDS


def measured(session: Session, conversation: Conversation, *, real: int | None, counted: int) -> None:
    """The real prompt of a response against the counted request that was sent: the session's
    starting point for the next projection, and one more sample of the model's ratio."""
    if real and real > 0:
        session.last_prompt_tokens, session.counted_prompt_tokens = real, counted
    else:
        session.counted_prompt_tokens = 0
    session.last_call_at = clock.now_datetime()  # the prompt cache was read or written just now
    session.save(update_fields=["last_prompt_tokens", "counted_prompt_tokens", "last_call_at"])
    pressure.ratio_record(model=conversation.model, real=real or 0, counted=counted)
