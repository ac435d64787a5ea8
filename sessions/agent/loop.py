"""The agent loop: what runs on a worker for one chat turn (queue `agent`).

`turn_drain` runs a conversation's queued turns in order under its turn lease. Each turn: its
message enters the history (only now, after every turn before it), the preflight check, a
streaming model call, tool execution in the workspace, usage recording, the post-response check,
error recovery with at most `max_compression_attempts` compressions, and an iteration cap.
In-loop compressions run inline here (never waiting on another task). What each model call is
made from (the session, its context engine built once per call, the offered tools) and the
preflight and post-response checks are in `context_checks.py`.

Stop is cooperative: the turn's `stop_requested` is read a few times a second while the reply
streams and before every model call and tool call. A stop closes the model's stream, keeps the
text that had arrived (marked stopped), starts no further tool call, and answers every tool call
already made (with "not run"), so the context stays valid. A failed turn is recorded with its
reason and leaves no placeholder behind. The text streamed so far is saved on the turn about once
a second, so a page loaded mid-stream shows it.
"""
from __future__ import annotations

import json
import logging
import time
import uuid

from django.conf import settings
from django.utils import timezone

from compression.core.hygiene import made_progress
from llm.base import Final, TextDelta
from llm.errors import ProviderError
from sessions import live, presenters
from sessions.agent.cache_timing import cache_timing
from sessions.agent.context_checks import (
    RequestContext,
    measured,
    post_response_check,
    preflight,
    request_context,
    request_parts,
    warn_tool_clashes,
)
from sessions.agent.tools import run_tool
from sessions.agent.tools.mcp.client import CLIENTS as MCP_CLIENTS
from sessions.agent.tools.mcp.client import STOPPED as MCP_STOPPED
from sessions.agent.tools.mcp.offer import PREFIX as MCP_PREFIX
from sessions.models import CompressionEvent, Conversation, Session, Turn
from sessions.services import attachments, pressure, runtime
from sessions.services import mcp as mcp_services
from sessions.services.compaction import compression_inline
from sessions.services.context import context_messages, message_append, session_active
from sessions.services.conversations import title_after_reply
from sessions.services.locks import TURN_LOCK, lease_kept, lock_acquire, lock_refresh, lock_release
from sessions.services.routes import models_larger
from sessions.services.turn_end import turn_fail, turn_finish, turn_stopped
from sessions.services.usage import usage_record

log = logging.getLogger(__name__)

DELTA_FLUSH_SECONDS = 0.05
STOP_POLL_SECONDS = 0.25
PARTIAL_SAVE_SECONDS = 1.0
STOPPED_DURING_CALL = "Stopped: the user stopped the turn during this tool call; it may not have finished."


class TurnFailed(Exception):
    """The turn ends with this user-facing message."""


class TurnStopped(Exception):
    """The user pressed Stop; the turn ends with what it produced so far."""


class _StreamStopped(Exception):
    def __init__(self, text: str, latency: float) -> None:
        super().__init__("stopped")
        self.text, self.latency = text, latency


def turn_lock_ttl() -> float:
    return float(settings.HERMES_TURN_LOCK_TTL)


def _compaction_goes_first(turn: Turn) -> bool:
    """Gateway hygiene queued a compaction for this turn when it was sent (SPEC §5.1): the turn
    waits for it; the compression job hands the turn over when it ends (and the sweep queues it
    again should that job be lost)."""
    return turn.status == "queued" and CompressionEvent.objects.filter(
        conversation_id=turn.conversation_id, trigger="hygiene", status__in=("queued", "running"),
        started_at__gte=turn.created_at).exists()


def turn_drain(*, conversation_id) -> bool:
    """Run the conversation's queued turns in order, up to one whose hygiene compaction has not
    run yet. False when another worker holds the lease."""
    holder = uuid.uuid4().hex
    if not lock_acquire(conversation_id=conversation_id, kind=TURN_LOCK, ttl=turn_lock_ttl(), holder=holder):
        return False
    try:
        while True:
            turn = Turn.objects.filter(conversation_id=conversation_id, status__in=("queued", "running")).order_by("id").first()
            if turn is None or _compaction_goes_first(turn):
                return True
            with lease_kept(conversation_id=conversation_id, kind=TURN_LOCK, holder=holder, ttl=turn_lock_ttl()):
                turn_run(turn=turn, holder=holder)  # the heartbeat keeps the lease through long calls
    finally:
        lock_release(conversation_id=conversation_id, kind=TURN_LOCK, holder=holder)


def _stop_requested(turn: Turn) -> bool:
    return Turn.objects.filter(id=turn.id, stop_requested=True).exists()


def _enter_history(turn: Turn, conversation: Conversation) -> None:
    """The turn's message joins the model's history now that every turn before it has ended,
    with its attachments' parts built now (scaled images, PDFs; text files into the workspace)."""
    if turn.user_message_id is not None or not (turn.text or turn.attachments.exists()):
        live.turn_started(turn)
        return
    try:
        content = attachments.message_content(turn)
    except attachments.AttachmentUnavailable as exc:
        raise TurnFailed(str(exc)) from None
    message = message_append(session=session_active(conversation), role="user", content=content)
    attachments.attachments_link(turn, message)
    turn.user_message = message
    turn.save(update_fields=["user_message"])
    live.turn_started(turn, message)


def turn_run(*, turn: Turn, holder: str) -> None:
    # Claimed with one conditional update: a cancel that came first wins.
    if not Turn.objects.filter(id=turn.id, status__in=("queued", "running")).update(
            status="running", started_at=timezone.now()):
        return
    turn.refresh_from_db()
    conversation = turn.conversation
    try:
        if turn.stop_requested:
            raise TurnStopped()
        _enter_history(turn, conversation)
        _agent_loop(turn=turn, conversation=conversation, holder=holder)
    except TurnStopped:
        turn_stopped(turn)
        return
    except (TurnFailed, runtime.ConfigurationProblem) as exc:
        turn_fail(turn, str(exc))
        return
    except Exception as exc:  # a bug must end the turn visibly, never leave it "running"
        log.exception("turn %s crashed", turn.id)
        turn_fail(turn, f"The turn failed unexpectedly ({type(exc).__name__}). Your messages are saved; try again.")
        return
    turn_finish(turn, "done")
    live.turn_changed(turn)
    title_after_reply(turn=turn)  # the first reply gives the conversation its title


def _stream_once(*, provider, conversation: Conversation, messages: list[dict], tools, turn: Turn) -> Final:
    """One streamed model call. Deltas go to the browser every DELTA_FLUSH_SECONDS; the text so
    far is saved (and sent whole) every PARTIAL_SAVE_SECONDS; a stop closes the stream
    (`_StreamStopped` carries the text that had arrived)."""
    final = None
    text: list[str] = []
    pending: list[str] = []
    stream_id = turn.stream_id
    Turn.objects.filter(id=turn.id).update(partial_text="", iterations=turn.iterations)
    live.stream_started(conversation.id, stream_id)
    started = last_flush = last_poll = last_save = time.monotonic()
    events = provider.stream(messages, model=conversation.model, max_tokens=conversation.max_tokens, tools=tools)
    try:
        for event in events:
            if isinstance(event, TextDelta):
                pending.append(event.text)
                text.append(event.text)
            elif isinstance(event, Final):
                final = event
            # ToolCall events are not shown: the final message carries every call, shown once stored.
            now = time.monotonic()
            if pending and now - last_flush >= DELTA_FLUSH_SECONDS:
                live.stream_delta(conversation.id, stream_id, "".join(pending))
                pending, last_flush = [], now
            if final is None and now - last_save >= PARTIAL_SAVE_SECONDS:
                so_far = "".join(text)
                Turn.objects.filter(id=turn.id).update(partial_text=so_far)
                live.stream_text(conversation.id, stream_id, so_far)
                pending, last_save = [], now
            if final is None and now - last_poll >= STOP_POLL_SECONDS:
                last_poll = now
                if _stop_requested(turn):
                    raise _StreamStopped("".join(text), now - started)
    finally:
        events.close()  # a stop leaves the loop early: this closes the HTTP stream
    if pending:
        live.stream_delta(conversation.id, stream_id, "".join(pending))
    if final is None:
        raise TurnFailed("The model's stream ended without a final message. Please try again.")
    return final


def _keep_stopped_reply(turn: Turn, conversation: Conversation, session: Session, stop: _StreamStopped,
                        provider_name: str) -> None:
    """The text that arrived before Stop, stored as the reply (marked stopped); nothing when none did."""
    usage_record(conversation_id=conversation.id, session_id=session.id, usage=None, model=conversation.model,
                 provider=provider_name, latency=stop.latency, error="stopped by the user")
    if not stop.text.strip():
        live.stream_removed(conversation.id, turn.stream_id)
        return
    assistant = message_append(session=session, role="assistant", content=stop.text)
    assistant.stopped = True
    assistant.save(update_fields=["stopped"])
    live.message_added(assistant, stream_id=turn.stream_id)


def _engine_tool_call(engine, name: str, arguments: str, messages: list[dict]) -> str:
    """Run one of the engine's tools; whatever goes wrong comes back to the model as an error."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
        if not isinstance(args, dict):
            raise ValueError("the arguments must be a JSON object")
    except ValueError as exc:
        return f"Error: {name}: invalid arguments ({exc})"
    try:
        result = engine.handle_tool_call(name, args, messages=messages)
    except Exception as exc:  # an engine's bug must not end the turn
        log.exception("context engine tool %s failed", name)
        return f"Error: {name} failed: {type(exc).__name__}: {exc}"
    return result if isinstance(result, str) else json.dumps(result, default=str)


def _mcp_tool_call(turn: Turn, conversation: Conversation, name: str, arguments) -> object:
    """Run one MCP tool on its server (the connection is this worker's); the content for the tool
    message, or STOPPED when the user pressed Stop during the call. Never raises otherwise."""
    route = mcp_services.tool_route(name, conversation)
    if route is None:
        return f"Error: the MCP tool {name} is not offered any more (its server was switched off or is down)"
    server, tool = route
    try:
        args = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else dict(arguments or {})
        if not isinstance(args, dict):
            raise ValueError("the arguments must be a JSON object")
    except (TypeError, ValueError) as exc:
        return f"Error: {name}: invalid arguments ({exc})"
    outcome = MCP_CLIENTS.call(server, tool, args, should_stop=lambda: _stop_requested(turn))
    if outcome is MCP_STOPPED:
        return outcome
    content, _ = outcome
    return content


def recovery_hint(*, conversation: Conversation, cfg) -> str:
    """What the user can do when the conversation no longer fits its model, in plain words (a
    failed turn's reason is shown as text): /compress only when compression is on, /new, and the
    larger models this installation offers under *Switch model*, each with its window."""
    window = runtime.model_window(conversation, cfg)
    larger = models_larger(cfg, conversation=conversation, than=window)
    steps = ["try /compress followed by a topic to keep only what matters"] if cfg.compression.enabled else []
    steps.append("start a new conversation with /new")
    if larger:
        steps.append("switch this conversation to a model with a larger context window under Switch model: "
                     + ", ".join(m.text for m in larger))
    text = steps[0] if len(steps) == 1 else ", ".join(steps[:-1]) + ", or " + steps[-1]
    text = text[0].upper() + text[1:] + "."
    if not larger:
        text += f" No model offered here has a larger context window than this one ({window:,} tokens)."
    return text


def overflow_compression_off(*, conversation: Conversation, cfg, detail: str) -> str:
    """The reason of a turn that overflowed while compression is switched off. Only staff are told
    it is off (the owner can do nothing about it; /compress would only be refused)."""
    text = (f"The conversation no longer fits the model's context window ({detail.rstrip('.')}). "
            f"{recovery_hint(conversation=conversation, cfg=cfg)}")
    if conversation.owner.is_staff:
        text += (" Compression is switched off by an administrator (the Enabled box of the Compression settings), "
                 "so nothing was compressed; switch it on there to let a conversation that no longer fits be compressed.")
    return text


def _agent_loop(*, turn: Turn, conversation: Conversation, holder: str) -> None:
    """The turn's model calls (SPEC §5, §11): the preflight, then calls until a reply calls no tool,
    each with the context of its moment, its tools run after it and the post-response check."""
    cfg = runtime.current_config()
    provider = runtime.main_provider(conversation, cfg)
    first = request_context(conversation, cfg)
    warn_tool_clashes(first)
    first = cache_timing(conversation, cfg, first)  # compact on return when the cache has expired
    context: RequestContext | None = preflight(conversation, cfg, first) if cfg.compression.enabled else first
    attempts = 0  # compressions after an overflow, at most max_compression_attempts
    while turn.iterations < cfg.agent.max_iterations:
        if _stop_requested(turn):
            raise TurnStopped()
        lock_refresh(conversation_id=conversation.id, kind=TURN_LOCK, holder=holder, ttl=turn_lock_ttl())
        if context is None:  # the user's MCP switch and the servers' states apply from the next request
            conversation.refresh_from_db(fields=["mcp_off"])
            context = request_context(conversation, cfg)
        messages = context_messages(context.session)
        try:
            final = _model_call(turn, provider, conversation, cfg, context, messages)
        except ProviderError as exc:
            attempts += 1
            _recover_from_overflow(exc, conversation, context.session, cfg, attempts)
            context = None
            continue
        _record_response(turn, provider, conversation, context, final,
                         counted=pressure.counted_request(messages, context.tools), messages=messages)
        if not final.tool_calls:
            return
        _run_tool_calls(turn, conversation, cfg, context, final.tool_calls, messages)
        if cfg.compression.enabled:
            post_response_check(conversation, cfg, context, final.usage.prompt_tokens)
        context = None
    raise TurnFailed(f"Stopped after {cfg.agent.max_iterations} model calls in one turn (the iteration cap). "
                     "Ask the agent to continue if there is more to do.")


def _model_call(turn: Turn, provider, conversation: Conversation, cfg, context: RequestContext,
                messages: list[dict]) -> Final:
    """One streamed call with ``messages``. A stop keeps the text that arrived (TurnStopped); a
    failed call is recorded and its ProviderError raised."""
    request, request_tools = request_parts(messages, context.tools, cfg, conversation, context.session)
    started = time.monotonic()
    try:
        return _stream_once(provider=provider, conversation=conversation, messages=request, tools=request_tools,
                            turn=turn)
    except _StreamStopped as stop:
        _keep_stopped_reply(turn, conversation, context.session, stop, provider.name)
        raise TurnStopped() from None
    except ProviderError as exc:
        usage_record(conversation_id=conversation.id, session_id=context.session.id, usage=None,
                     model=conversation.model, provider=provider.name, latency=time.monotonic() - started,
                     error=exc.message)
        raise


def _recover_from_overflow(exc: ProviderError, conversation: Conversation, session: Session, cfg,
                           attempt: int) -> None:
    """SPEC §5.4: a context overflow is compressed away (``attempt`` of at most
    max_compression_attempts) and the call made again; anything else, or no way to make it fit,
    fails the turn with what the user can do. A limit the error names that is lower than the
    session's window becomes its window."""
    if not exc.triggers_compression:
        raise TurnFailed(f"The model call failed: {exc.message}") from exc
    if not cfg.compression.enabled:
        raise TurnFailed(overflow_compression_off(conversation=conversation, cfg=cfg, detail=exc.message)) from exc
    limit = getattr(exc, "limit", None)
    if limit and limit < runtime.session_window(conversation, session, cfg):
        session.context_length = limit
        session.save(update_fields=["context_length"])
    if attempt > cfg.compression.max_compression_attempts:
        raise TurnFailed(f"The conversation still does not fit after {attempt - 1} compressions "
                         f"({exc.message.rstrip('.')}). {recovery_hint(conversation=conversation, cfg=cfg)}") from exc
    outcome = compression_inline(conversation_id=conversation.id, trigger="error_recovery", force=True)
    e = outcome.event
    if not outcome.compressed or not made_progress(e.messages_before, e.messages_after, e.tokens_before, e.tokens_after):
        raise TurnFailed(f"The conversation does not fit the model and compression could not shrink it "
                         f"({e.reason or e.status}). {recovery_hint(conversation=conversation, cfg=cfg)}") from exc


def _record_response(turn: Turn, provider, conversation: Conversation, context: RequestContext, final: Final, *,
                     counted: int, messages: list[dict]) -> None:
    """The response's usage, the engine's state after it, its real prompt against the ``counted``
    request (``messages``); the reply stored and shown in place of its stream, and the gauge from
    what this call already holds (no engine rebuilt, no context read)."""
    session, stream_id = context.session, turn.stream_id
    turn.iterations += 1
    usage_record(conversation_id=conversation.id, session_id=session.id, usage=final.usage,
                 model=final.model or conversation.model, provider=provider.name, latency=final.latency,
                 stop_reason=final.stop_reason)
    context.engine.update_from_response(final.usage)
    runtime.engine_state_save(session=session, engine=context.engine)
    measured(session, conversation, real=final.usage.prompt_tokens, counted=counted)
    assistant = message_append(session=session, role="assistant", content=final.message.get("content"),
                               tool_calls=final.tool_calls or None)
    Turn.objects.filter(id=turn.id).update(partial_text=None, iterations=turn.iterations)
    live.message_added(assistant, stream_id=stream_id)
    live.gauge_changed(conversation, figures=presenters.GaugeFigures(
        session=session, messages=[*messages, assistant.as_chat()], offered=context.offered,
        blocked=context.engine.blocked_reason()))
    live.usage_changed(conversation)


def _run_tool_calls(turn: Turn, conversation: Conversation, cfg, context: RequestContext, calls: list[dict],
                    messages: list[dict]) -> None:
    """Each call in order, its result stored and shown. A stop starts no further call (those not
    run are answered "not run" by turn_stopped); a stop during an MCP call is that call's answer."""
    for call in calls:
        if _stop_requested(turn):
            raise TurnStopped()
        fn = call.get("function", {})
        name, arguments = fn.get("name", ""), fn.get("arguments") or "{}"
        content: object
        if name in context.offered.engine_names:
            content = _engine_tool_call(context.engine, name, arguments, messages)
        elif str(name).startswith(MCP_PREFIX):
            content = _mcp_tool_call(turn, conversation, name, arguments)
        else:
            content = run_tool(name, arguments, workspace=conversation.workspace,
                               terminal_enabled=cfg.agent.terminal_enabled, terminal_timeout=cfg.agent.terminal_timeout,
                               terminal_network=cfg.agent.terminal_network).content
        stopped = content is MCP_STOPPED
        tool_msg = message_append(session=context.session, role="tool",
                                  content=STOPPED_DURING_CALL if stopped else content, tool_call_id=call["id"],
                                  name=name)
        live.tool_result_added(tool_msg)
        if stopped:
            raise TurnStopped()
