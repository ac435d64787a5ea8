"""The agent loop: what runs on a worker for one chat turn (queue `agent`).

`turn_drain` runs a conversation's queued turns in order under its turn lease. Each turn: its
message enters the history (only now, after every turn before it), the preflight check, a
streaming model call, tool execution in the workspace, usage recording, the post-response check,
error recovery with at most `max_compression_attempts` compressions, and an iteration cap.
In-loop compressions run inline here (never waiting on another task).

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

from compression.core.caching import apply_cache_strategy, prompt_caching_status
from compression.core.hygiene import MAX_PREFLIGHT_PASSES, made_progress, preflight_gate
from llm.base import Final, TextDelta
from llm.errors import ProviderError
from sessions import live
from sessions.agent.tools import run_tool
from sessions.agent.tools.mcp.client import CLIENTS as MCP_CLIENTS
from sessions.agent.tools.mcp.client import STOPPED as MCP_STOPPED
from sessions.agent.tools.mcp.offer import PREFIX as MCP_PREFIX
from sessions.models import Conversation, Session, Turn
from sessions.services import attachments, pressure, runtime
from sessions.services import mcp as mcp_services
from sessions.services.compaction import compression_inline
from sessions.services.context import context_messages, context_rows, message_append, session_active
from sessions.services.conversations import title_after_reply
from sessions.services.locks import TURN_LOCK, lease_kept, lock_acquire, lock_refresh, lock_release
from sessions.services.usage import usage_record

log = logging.getLogger(__name__)

DELTA_FLUSH_SECONDS = 0.05
STOP_POLL_SECONDS = 0.25
PARTIAL_SAVE_SECONDS = 1.0
NOT_RUN_STOPPED = "Not run: the user stopped the turn before this tool call."
NOT_RUN_FAILED = "Not run: the turn failed before this tool call."
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


def turn_drain(*, conversation_id) -> bool:
    """Run the conversation's queued turns in order. False when another worker holds the lease."""
    holder = uuid.uuid4().hex
    if not lock_acquire(conversation_id=conversation_id, kind=TURN_LOCK, ttl=turn_lock_ttl(), holder=holder):
        return False
    try:
        while True:
            turn = Turn.objects.filter(conversation_id=conversation_id, status__in=("queued", "running")).order_by("id").first()
            if turn is None:
                return True
            with lease_kept(conversation_id=conversation_id, kind=TURN_LOCK, holder=holder, ttl=turn_lock_ttl()):
                turn_run(turn=turn, holder=holder)  # the heartbeat keeps the lease through long calls
    finally:
        lock_release(conversation_id=conversation_id, kind=TURN_LOCK, holder=holder)


def _stop_requested(turn: Turn) -> bool:
    return Turn.objects.filter(id=turn.id, stop_requested=True).exists()


def _answer_open_tool_calls(conversation: Conversation, text: str) -> None:
    """Give every tool call of the context's last assistant message a result, so the next request
    is valid (the API refuses a tool call without its result)."""
    session = session_active(conversation)
    rows = list(context_rows(session).order_by("-seq")[:50])
    calls = []
    for row in rows:
        if row.role == "assistant":
            calls = [c for c in row.tool_calls or [] if isinstance(c, dict) and c.get("id")]
            break
    answered = {row.tool_call_id for row in rows if row.role == "tool"}
    for call in calls:
        if call["id"] not in answered:
            message_append(session=session, role="tool", content=text, tool_call_id=call["id"],
                           name=(call.get("function") or {}).get("name", ""))


def _finish(turn: Turn, status: str, error: str = "") -> None:
    turn.status, turn.error, turn.finished_at, turn.partial_text = status, error, timezone.now(), None
    turn.save(update_fields=["status", "error", "finished_at", "partial_text", "iterations"])


def turn_fail(turn: Turn, message: str) -> None:
    """Close a turn as failed with ``message`` (its open tool calls answered, the page told); also
    how the sweep closes a turn whose worker stopped."""
    try:
        _answer_open_tool_calls(turn.conversation, NOT_RUN_FAILED)
    except Exception:  # the failure itself must still be recorded
        log.exception("could not answer the open tool calls of turn %s", turn.id)
    _finish(turn, "failed", message)
    live.turn_failed(turn)


def _stopped(turn: Turn) -> None:
    _answer_open_tool_calls(turn.conversation, NOT_RUN_STOPPED)
    _finish(turn, "stopped")
    live.turn_stopped(turn)


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
        _stopped(turn)
        return
    except (TurnFailed, runtime.ConfigurationProblem) as exc:
        turn_fail(turn, str(exc))
        return
    except Exception as exc:  # a bug must end the turn visibly, never leave it "running"
        log.exception("turn %s crashed", turn.id)
        turn_fail(turn, f"The turn failed unexpectedly ({type(exc).__name__}). Your messages are saved; try again.")
        return
    _finish(turn, "done")
    live.turn_changed(turn)
    title_after_reply(turn=turn)  # the first reply gives the conversation its title


def _preflight(conversation: Conversation, cfg, tools: list[dict]) -> None:
    """SPEC §5.2: the projected next request (§3.4) against the threshold, up to 3 passes."""
    for _ in range(MAX_PREFLIGHT_PASSES):
        session = session_active(conversation)
        engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
        messages = context_messages(session)
        threshold = engine.threshold_tokens
        if not preflight_gate(message_count=len(messages) - 1,
                              rough_message_tokens=engine.estimate_history_tokens(messages),
                              threshold_tokens=threshold, protect_first_n=cfg.compression.protect_first_n,
                              protect_last_n=cfg.compression.protect_last_n):
            return
        projected = pressure.projection_of(conversation, session, cfg, messages=messages, tools=tools).tokens
        if projected < threshold or engine.should_defer_preflight_to_real_usage(projected):
            return
        outcome = compression_inline(conversation_id=conversation.id, trigger="preflight", current_tokens=projected)
        e = outcome.event
        if not outcome.compressed or not made_progress(e.messages_before, e.messages_after, e.tokens_before, e.tokens_after):
            return


def _request_parts(messages: list[dict], tools: list[dict], cfg, conversation: Conversation,
                   session: Session | None = None):
    """Messages and tool schemas with the configured cache breakpoints (none when caching is off)."""
    status = prompt_caching_status(conversation.model, conversation.provider, "")
    if not status.enabled:
        return messages, tools
    # A context rebuilt by a compression is sent cold once: strategies may price that call differently.
    hints = {"after_compression": session is not None and session.last_prompt_tokens == -1}
    cached = apply_cache_strategy(messages, strategy=cfg.caching.strategy, cache_ttl=cfg.caching.cache_ttl,
                                  native_anthropic=status.native_layout, tools=tools, hints=hints)
    return cached.messages, cached.tools


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


def _measured(session: Session, conversation: Conversation, *, real: int, counted: int) -> None:
    """The real prompt of a response against the counted request that was sent: the session's
    starting point for the next projection, and one more sample of the model's ratio."""
    if real and real > 0:
        session.last_prompt_tokens, session.counted_prompt_tokens = real, counted
    else:
        session.counted_prompt_tokens = 0
    session.save(update_fields=["last_prompt_tokens", "counted_prompt_tokens"])
    pressure.ratio_record(model=conversation.model, real=real or 0, counted=counted)


def recovery_hint(*, conversation: Conversation, cfg) -> str:
    """What the user can do when the conversation no longer fits its model, in plain words (a
    failed turn's reason is shown as text): /compress only when compression is on, /new, and the
    larger models this installation offers under *Switch model*, each with its window."""
    from sessions.services.routes import models_larger

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
    cfg = runtime.current_config()
    engine = runtime.engine_build(conversation=conversation, session=session_active(conversation), cfg=cfg)
    offered = pressure.offered_tools(cfg, engine, conversation)
    for clash in {t["name"] for t in pressure.engine_tool_schemas(engine)} - offered.engine_names:
        log.warning("context engine tool %r has the name of a workspace tool; it is not offered", clash)
    tools, engine_tool_names = offered.all, offered.engine_names
    provider = runtime.main_provider(conversation, cfg)
    if cfg.compression.enabled:
        _preflight(conversation, cfg, tools)
    attempts = 0
    while turn.iterations < cfg.agent.max_iterations:
        if _stop_requested(turn):
            raise TurnStopped()
        lock_refresh(conversation_id=conversation.id, kind=TURN_LOCK, holder=holder, ttl=turn_lock_ttl())
        session = session_active(conversation)
        engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
        if turn.iterations:  # the user's MCP switch and the servers' states apply from the next request
            conversation.refresh_from_db(fields=["mcp_off"])
            tools = pressure.offered_tools(cfg, engine, conversation).all
        messages = context_messages(session)
        request, request_tools = _request_parts(messages, tools, cfg, conversation, session)
        counted = pressure.counted_request(messages, tools)
        started = time.monotonic()
        try:
            final = _stream_once(provider=provider, conversation=conversation, messages=request,
                                 tools=request_tools, turn=turn)
        except _StreamStopped as stop:
            _keep_stopped_reply(turn, conversation, session, stop, provider.name)
            raise TurnStopped() from None
        except ProviderError as exc:
            usage_record(conversation_id=conversation.id, session_id=session.id, usage=None, model=conversation.model,
                         provider=provider.name, latency=time.monotonic() - started, error=exc.message)
            if not exc.triggers_compression:
                raise TurnFailed(f"The model call failed: {exc.message}") from exc
            if not cfg.compression.enabled:
                raise TurnFailed(overflow_compression_off(conversation=conversation, cfg=cfg,
                                                          detail=exc.message)) from exc
            limit = getattr(exc, "limit", None)
            if limit and limit < runtime.session_window(conversation, session, cfg):
                session.context_length = limit
                session.save(update_fields=["context_length"])
            attempts += 1
            if attempts > cfg.compression.max_compression_attempts:
                raise TurnFailed(f"The conversation still does not fit after {attempts - 1} compressions "
                                 f"({exc.message.rstrip('.')}). {recovery_hint(conversation=conversation, cfg=cfg)}"
                                 ) from exc
            outcome = compression_inline(conversation_id=conversation.id, trigger="error_recovery", force=True)
            e = outcome.event
            if not outcome.compressed or not made_progress(e.messages_before, e.messages_after, e.tokens_before, e.tokens_after):
                raise TurnFailed(f"The conversation does not fit the model and compression could not shrink it "
                                 f"({e.reason or e.status}). "
                                 f"{recovery_hint(conversation=conversation, cfg=cfg)}") from exc
            continue
        turn.iterations += 1
        usage_record(conversation_id=conversation.id, session_id=session.id, usage=final.usage, model=final.model or conversation.model,
                     provider=provider.name, latency=final.latency, stop_reason=final.stop_reason)
        engine.update_from_response(final.usage)
        runtime.engine_state_save(session=session, engine=engine)
        _measured(session, conversation, real=final.usage.prompt_tokens, counted=counted)
        assistant = message_append(session=session, role="assistant", content=final.message.get("content"),
                                   tool_calls=final.tool_calls or None)
        Turn.objects.filter(id=turn.id).update(partial_text=None, iterations=turn.iterations)
        live.message_added(assistant, stream_id=f"stream-{turn.id}-{turn.iterations - 1}")
        live.gauge_changed(conversation)
        live.usage_changed(conversation)
        if not final.tool_calls:
            return
        for call in final.tool_calls:
            if _stop_requested(turn):
                raise TurnStopped()  # the calls not run yet are answered "not run" by _stopped
            fn = call.get("function", {})
            if fn.get("name") in engine_tool_names:
                content = _engine_tool_call(engine, fn.get("name", ""), fn.get("arguments") or "{}", messages)
            elif str(fn.get("name", "")).startswith(MCP_PREFIX):
                content = _mcp_tool_call(turn, conversation, fn.get("name", ""), fn.get("arguments") or "{}")
                if content is MCP_STOPPED:
                    stopped = message_append(session=session, role="tool", content=STOPPED_DURING_CALL,
                                             tool_call_id=call["id"], name=fn.get("name", ""))
                    live.tool_result_added(stopped)
                    raise TurnStopped()
            else:
                content = run_tool(fn.get("name", ""), fn.get("arguments") or "{}", workspace=conversation.workspace,
                                   terminal_enabled=cfg.agent.terminal_enabled,
                                   terminal_timeout=cfg.agent.terminal_timeout,
                                   terminal_network=cfg.agent.terminal_network).content
            tool_msg = message_append(session=session, role="tool", content=content, tool_call_id=call["id"],
                                      name=fn.get("name", ""))
            live.tool_result_added(tool_msg)
        # Post-response check (SPEC §5.3): the real prompt of that response, with the tool results
        # just appended projected on top of it (the request about to be sent); with no usage, the
        # projection from the counted request, never 0.
        if cfg.compression.enabled:
            session.refresh_from_db()
            engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
            prompt = max(final.usage.prompt_tokens or 0, pressure.projection_of(
                conversation, session, cfg, messages=context_messages(session), tools=tools).tokens)
            if engine.should_compress(prompt):
                compression_inline(conversation_id=conversation.id, trigger="post_response")
    raise TurnFailed(f"Stopped after {cfg.agent.max_iterations} model calls in one turn (the iteration cap). "
                     "Ask the agent to continue if there is more to do.")
