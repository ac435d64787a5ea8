"""Compaction behind every trigger (SPEC §7): lock, memory hook, engine, persist (rotation or in
place), event. Three entry points over one core:

- `compression_request`: queue a job (manual, hygiene, admin); the lock is taken at request time;
- `compression_job_run`: run a queued job on the `compression` queue (holder and event id given);
- `compression_inline`: compress now inside a running turn (preflight, post-response, recovery).

A crash anywhere before the persist transaction leaves the session exactly as it was; the lock
is a lease that expires on its own. Nothing is ever deleted.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.dispatch import Signal
from django.utils import timezone

from compression.core.compressor_state import REASON_SUMMARY_FAILED
from compression.core.markers import SUMMARY_KEY
from compression.core.summary import SummariserUnavailable, SummaryResult, summary_max_tokens
from llm.models import get_model
from sessions import live
from sessions.models import ApiCall, CompressionEvent, Conversation, Session
from sessions.services import notices, pressure, runtime
from sessions.services.context import context_messages, context_rows, message_append, session_active
from sessions.services.enqueue import compression_run_signature, enqueue_fast, turn_run_signature
from sessions.services.locks import COMPRESSION_LOCK, TURN_LOCK, lease_kept, lock_acquire, lock_refresh, lock_release
from sessions.services.usage import usage_record

log = logging.getLogger(__name__)

# Memory providers connect here; each receiver returns text (or None) for the summariser.
pre_compress = Signal()

def lock_ttl() -> float:
    """Seconds a compression lease lives without a refresh (the heartbeat refreshes it every
    third of that while the job runs; a killed worker's job is closed one lease later)."""
    return float(getattr(settings, "HERMES_COMPRESSION_LOCK_TTL", 30))


# Why an event left queued or running by a worker that stopped was closed: the persist
# transaction never committed, so the session is exactly as it was.
INTERRUPTED = "interrupted: the worker stopped; nothing was changed"


class ConversationBusy(Exception):
    """A turn is running; a queued compression job tries again shortly instead of interleaving."""


class SummaryError(Exception):
    """The auxiliary model gave nothing usable."""


@dataclass
class Outcome:
    event: CompressionEvent
    session: Session  # the active session afterwards

    @property
    def compressed(self) -> bool:
        return self.event.status == "compressed"


def _summariser(*, conversation: Conversation, session: Session, cfg, provider, model: str):
    """The summariser callable on one route: prompt in, the model's answer (text and stop reason)
    out. Its output cap is the summary's room (SPEC §6: the budget is guidance in the prompt, not a
    cap), bounded by the model's own output limit; a cut-off answer is recognised by the engine."""
    info = get_model(model)

    def summarise(prompt: str, budget: int) -> SummaryResult:
        max_tokens = summary_max_tokens(budget)
        if info is not None:
            max_tokens = min(max_tokens, info.max_output)
        try:
            final = provider.complete([{"role": "user", "content": prompt}], model=model,
                                      max_tokens=max_tokens, timeout=cfg.auxiliary.timeout)
        except Exception as exc:
            usage_record(conversation_id=conversation.id, session_id=session.id, usage=None, model=model,
                         provider=getattr(provider, "name", ""), purpose="compression", error=str(exc))
            raise
        usage_record(conversation_id=conversation.id, session_id=session.id, usage=final.usage, model=model,
                     provider=getattr(provider, "name", ""), purpose="compression", latency=final.latency,
                     stop_reason=final.stop_reason)
        text = (final.text or "").strip()
        if not text:
            raise SummaryError("the auxiliary model returned an empty summary")
        return SummaryResult(text, final.stop_reason)

    return summarise


@dataclass(frozen=True)
class Summarisers:
    primary: Callable  # the auxiliary route's (or one that raises SummariserUnavailable)
    fallback: Callable | None  # the main model's, tried once when the primary fails
    aux_model: str = ""  # the auxiliary route's model ("" when there is none)


def summarisers_for(*, conversation: Conversation, session: Session, cfg) -> Summarisers:
    """The summarisers a compression uses. When the auxiliary route cannot even be built, the main
    model summarises and the reason is kept for staff."""
    try:
        main = _summariser(conversation=conversation, session=session, cfg=cfg,
                           provider=runtime.main_provider(conversation, cfg), model=conversation.model)
    except runtime.ConfigurationProblem:
        main = None
    try:
        provider, model = runtime.aux_route(conversation, cfg)
    except Exception as exc:  # e.g. a custom route without base_url: no auxiliary model at all
        reason = f"no auxiliary model is usable ({exc})"

        def unavailable(prompt: str, budget: int) -> str:
            raise SummariserUnavailable(reason)

        return Summarisers(unavailable, main)
    aux = _summariser(conversation=conversation, session=session, cfg=cfg, provider=provider, model=model)
    follows_main = cfg.auxiliary.provider in ("auto", "main") and model == conversation.model
    return Summarisers(aux, None if follows_main else main, model)


def memory_context(messages: list[dict]) -> str | None:
    """What the memory providers (``pre_compress`` receivers) give the summariser, or None."""
    parts = [text for _, text in pre_compress.send(sender=None, messages=messages) if text]
    return "\n\n".join(parts) if parts else None


def _progress(conversation_id, event: CompressionEvent, holder: str):
    def on_progress(phase: str) -> None:
        event.phase = phase
        event.save(update_fields=["phase"])
        lock_refresh(conversation_id=conversation_id, kind=COMPRESSION_LOCK, holder=holder, ttl=lock_ttl())
        live.compression_progress(event)
    return on_progress


def _persist(*, conversation: Conversation, session: Session, result, in_place: bool, event: CompressionEvent) -> Session:
    """Write the compressed context in one transaction (rotation or in place)."""
    system, rest = result.messages[0], result.messages[1:]
    assert system["role"] == "system"
    with transaction.atomic():
        # The conversation row first, as every writer of a conversation's sessions takes it (a
        # model switch, message appends), so two writers never wait on each other in a circle.
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if in_place:
            context_rows(session).update(archived=True)
            target = session
        else:
            session.ended_at = timezone.now()
            session.end_reason = "compression"
            session.save(update_fields=["ended_at", "end_reason"])
            # What the session learnt about the model (a window lowered by an overflow error) holds
            # for its continuation too.
            target = Session.objects.create(conversation=conversation, parent=session,
                                            context_length=session.context_length)
        target.system_prompt = system["content"] if isinstance(system["content"], str) else str(system["content"])
        target.save(update_fields=["system_prompt"])
        summary_row = None
        for msg in rest:
            is_summary = bool(msg.get(SUMMARY_KEY))
            row = message_append(session=target, role=msg["role"], content=msg.get("content"),
                                 tool_calls=msg.get("tool_calls"), tool_call_id=msg.get("tool_call_id", ""),
                                 name=msg.get("name", ""), visible=is_summary, is_summary=is_summary)
            if is_summary:
                summary_row = row
        event.new_session = None if in_place else target
        event.summary_message = summary_row
    return target


SKIPPED_BUSY = "already compressing"
SKIPPED_REPEAT = "a repeat of the same request moments after it ran"


def _skipped(conversation: Conversation, session: Session, trigger: str, focus_topic: str | None,
             reason: str = SKIPPED_BUSY) -> CompressionEvent:
    event = CompressionEvent.objects.create(conversation=conversation, session=session, trigger=trigger,
                                            status="skipped", reason=reason,
                                            focus_topic=focus_topic or "", finished_at=timezone.now())
    live.compression_finished(event)
    return event


def _close_interrupted(conversation: Conversation | None = None, *, ids=None) -> int:
    """Events left queued or running by a worker that died (all of the conversation's, or those
    `ids`): only called while holding the lock, so no other compression of it is running."""
    events = CompressionEvent.objects.filter(status__in=("queued", "running"))
    events = events.filter(conversation=conversation) if ids is None else events.filter(id__in=ids)
    return events.update(status="failed", phase="done", reason=INTERRUPTED, finished_at=timezone.now())


def compression_recover(*, conversation_id, rerun: bool = True) -> dict:
    """Compression events of a conversation left queued or running with no live lease (the worker
    that held it stopped): a running one is closed as failed, "interrupted" (its persist never
    committed, so nothing changed); the newest queued one, which never started, is queued again
    under a new lease when `rerun` (the broker is reachable), or left queued for a later pass.
    Open pages are told. Returns {"closed": [ids], "requeued": id or None}; nothing is done while
    someone holds the lease."""
    holder = lock_acquire(conversation_id=conversation_id, kind=COMPRESSION_LOCK, ttl=lock_ttl())
    if holder is None:
        return {"closed": [], "requeued": None}
    requeued = None
    finished = None
    try:
        events = list(CompressionEvent.objects.filter(conversation_id=conversation_id,
                                                      status__in=("queued", "running")).order_by("id"))
        queued = [e for e in events if e.status == "queued"]
        again = queued[-1] if rerun and queued else None
        closed = [e.id for e in events if e is not again and (e.status == "running" or again is not None)]
        if closed:
            _close_interrupted(ids=closed)
            log.warning("compression events %s of conversation %s were interrupted (their worker stopped)",
                        closed, conversation_id)
            finished = CompressionEvent.objects.select_related("conversation").get(id=closed[-1])
        if again is not None:
            # The job keeps this lease; a copy of it still waiting in the broker finds the lease
            # taken and leaves the event to this one. A manual request ignores the cooldown.
            compression_run_signature(again.id, holder, again.trigger == "manual").apply_async()
            requeued = again.id
            log.warning("compression event %s of conversation %s was queued again (its job was lost)",
                        again.id, conversation_id)
    finally:
        if requeued is None:
            lock_release(conversation_id=conversation_id, kind=COMPRESSION_LOCK, holder=holder)
    if finished is not None:
        # Told once the lease is free: a page shown "interrupted" can ask for a compression at once.
        live.compression_finished(finished)  # re-renders the whole feed: every closed event shows
    return {"closed": closed, "requeued": requeued}


MANUAL_DEBOUNCE_SECONDS = 15


def _just_compressed(conversation: Conversation, focus_topic: str | None) -> bool:
    since = timezone.now() - timedelta(seconds=MANUAL_DEBOUNCE_SECONDS)
    return CompressionEvent.objects.filter(conversation=conversation, trigger="manual", focus_topic=focus_topic or "",
                                           status__in=("queued", "running", "compressed"), started_at__gte=since).exists()


@dataclass
class Requested:
    """A request's event (queued, or skipped) and whether the job was handed to a worker, known once
    the caller's transaction commits (None until then and when skipped). Not stored: False when the
    broker was unreachable; the event stays queued, and the sweep hands it over once it is back."""
    event: CompressionEvent
    enqueued: bool | None = None


def compression_request(*, conversation_id, trigger: str, focus_topic: str | None = None,
                        force: bool = False, then_turn: int | None = None) -> Requested:
    """Queue a compression job (manual, hygiene, admin). The lock is taken now, so however many
    requests arrive at once exactly one is queued; the rest are recorded as skipped."""
    conversation = Conversation.objects.get(id=conversation_id)
    session = session_active(conversation)
    holder = lock_acquire(conversation_id=conversation.id, kind=COMPRESSION_LOCK, ttl=lock_ttl())
    if holder is not None:
        _close_interrupted(conversation)
    reason = SKIPPED_BUSY
    if holder is not None and trigger == "manual" and _just_compressed(conversation, focus_topic):
        # A double click (or twenty): the same request moments after one ran is the same request.
        lock_release(conversation_id=conversation.id, kind=COMPRESSION_LOCK, holder=holder)
        holder, reason = None, SKIPPED_REPEAT
    if holder is None:
        if then_turn is not None:
            transaction.on_commit(lambda: enqueue_fast(turn_run_signature(then_turn), what=f"turn {then_turn}"))
        return Requested(_skipped(conversation, session, trigger, focus_topic, reason))
    requested = Requested(CompressionEvent.objects.create(
        conversation=conversation, session=session, trigger=trigger, status="queued", phase="queued",
        focus_topic=focus_topic or ""))

    def enqueue() -> None:
        event = requested.event
        job = compression_run_signature(event.id, holder, force)
        if then_turn is not None:
            job = job | turn_run_signature(then_turn)
        requested.enqueued = enqueue_fast(job, what=f"compression event {event.id}")
        if requested.enqueued:  # the same Redis carries the live pushes: skip them when it is away
            live.compression_progress(event)

    transaction.on_commit(enqueue)
    return requested


def compression_job_run(*, event_id: int, holder: str, force: bool = False) -> Outcome:
    """Run a queued compression. Its lock was taken at request time; the turn lease is taken too,
    so a job never rotates a session under a running turn (`ConversationBusy`: try again shortly)."""
    event = CompressionEvent.objects.select_related("conversation").get(id=event_id)
    conversation = event.conversation
    session = session_active(conversation)
    if event.status != "queued":
        # A second delivery of a job that ran, or an event closed meanwhile: nothing to do.
        return Outcome(event=event, session=session)
    if not lock_refresh(conversation_id=conversation.id, kind=COMPRESSION_LOCK, holder=holder, ttl=lock_ttl()):
        # The lease expired while the job waited and another holder took it: the sweep queued the
        # job again under its own lease, or another compression closed this event. Theirs now.
        return Outcome(event=CompressionEvent.objects.get(id=event_id), session=session)
    turn_holder = lock_acquire(conversation_id=conversation.id, kind=TURN_LOCK, ttl=lock_ttl())
    if turn_holder is None:
        raise ConversationBusy(str(conversation.id))
    event.session, event.status, event.phase, event.started_at = session, "running", "starting", timezone.now()
    event.save(update_fields=["session", "status", "phase", "started_at"])
    live.compression_progress(event)
    try:
        # The turn lease is held for the whole job (no turn rotates under it) and kept alive too.
        with lease_kept(conversation_id=conversation.id, kind=TURN_LOCK, holder=turn_holder, ttl=lock_ttl()):
            return _compress(conversation=conversation, session=session, event=event, holder=holder, force=force)
    finally:
        lock_release(conversation_id=conversation.id, kind=TURN_LOCK, holder=turn_holder)


def compression_inline(*, conversation_id, trigger: str, focus_topic: str | None = None, force: bool = False,
                       in_place: bool | None = None, current_tokens: int | None = None, reason: str = "") -> Outcome:
    """Compress the active session now, from a turn that already holds the turn lease; the
    compression lock is taken here (skipped when another compression holds it). ``reason``, why
    the caller compacts now, leads the event's reason."""
    conversation = Conversation.objects.get(id=conversation_id)
    session = session_active(conversation)
    holder = lock_acquire(conversation_id=conversation.id, kind=COMPRESSION_LOCK, ttl=lock_ttl())
    if holder is None:
        return Outcome(event=_skipped(conversation, session, trigger, focus_topic), session=session)
    _close_interrupted(conversation)
    event = CompressionEvent.objects.create(conversation=conversation, session=session, trigger=trigger,
                                            focus_topic=focus_topic or "", phase="starting", reason=reason)
    return _compress(conversation=conversation, session=session, event=event, holder=holder, force=force,
                     in_place=in_place, current_tokens=current_tokens)


def compression_with_summariser(*, conversation: Conversation, session: Session, event: CompressionEvent,
                                holder: str, summariser) -> Outcome:
    """Compress now with the given summariser (a summary the user reviewed, say) instead of the
    configured one; the caller holds both leases and made ``event`` (its ``reason`` is kept)."""
    return _compress(conversation=conversation, session=session, event=event, holder=holder, force=True,
                     summariser=summariser)


def _compress(*, conversation: Conversation, session: Session, event: CompressionEvent, holder: str,
              force: bool = False, in_place: bool | None = None, current_tokens: int | None = None,
              summariser=None) -> Outcome:
    """The shared core: build the engine with the summariser, compress, persist, record the event;
    always releases the compression lock and closes the event. A given ``summariser`` is used as
    it is, with no fallback; a reason already on the event leads the engine's."""
    cfg = runtime.current_config()
    started = time.monotonic()
    try:
        # Gateway hygiene always compacts in place (SPEC §5.1).
        in_place = True if event.trigger == "hygiene" else (cfg.compression.in_place if in_place is None else in_place)
        event.in_place = in_place
        chosen = Summarisers(summariser, None) if summariser is not None else summarisers_for(
            conversation=conversation, session=session, cfg=cfg)
        engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg,
                                      summariser=chosen.primary, fallback_summariser=chosen.fallback)
        event.aux_model = chosen.aux_model
        live.compression_progress(event)
        messages = context_messages(session)
        with lease_kept(conversation_id=conversation.id, kind=COMPRESSION_LOCK, holder=holder, ttl=lock_ttl()):
            result = engine.compress(
                messages, current_tokens=current_tokens, focus_topic=event.focus_topic or None, force=force,
                on_progress=_progress(conversation.id, event, holder), extra_context=memory_context(messages),
                today=timezone.localdate(),
            )
        _record_result(event, result, conversation, sizes=_request_sizes(conversation, session, cfg, engine,
                                                                          messages, result))
        with transaction.atomic():
            if result.status == "compressed":
                session = _persist(conversation=conversation, session=session, result=result, in_place=in_place,
                                   event=event)
            runtime.engine_state_save(session=session, engine=engine)  # also a cooldown, the anti-thrash count
    except Exception as exc:
        log.exception("compression of conversation %s failed", conversation.id)
        event.status = "failed"
        event.reason = "; ".join(r for r in (event.reason, f"{type(exc).__name__}: {exc}") if r)[:2000]
    finally:
        _close_event(event, conversation, session, holder, started)
    live.compression_finished(event)
    return Outcome(event=event, session=session)


def _record_result(event: CompressionEvent, result, conversation: Conversation, *, sizes: tuple[int, int]) -> None:
    """The engine's result on the event (not saved yet); an auxiliary failure is logged and noticed.
    A failed summary is a failure; a cooldown or anti-thrash block an abort; "nothing to compress" a no-op."""
    summary_failed = result.status == "aborted" and (result.reason or "").startswith(REASON_SUMMARY_FAILED)
    event.status = "failed" if summary_failed else result.status
    event.reason = "; ".join(r for r in (event.reason, result.reason) if r)
    event.messages_before, event.messages_after = result.messages_before, result.messages_after
    event.tokens_before, event.tokens_after = sizes
    event.pruned_count, event.summarized_count = result.pruned_count, result.summarized_count
    event.summary = result.summary or ""
    event.messages_read, event.tokens_read = result.messages_read, result.tokens_read
    event.summariser_calls = result.summariser_calls
    if result.summariser_fallback_reason:
        event.aux_failure = result.summariser_fallback_reason[:2000]
        log.warning("the auxiliary summariser of conversation %s failed (%s); the main model summarised",
                    conversation.id, result.summariser_fallback_reason)
        notices.auxiliary_fallback_notify(event=event)  # the second in a row tells the user


def _close_event(event: CompressionEvent, conversation: Conversation, session: Session, holder: str,
                 started: float) -> None:
    """Save the event as finished (its cost, its duration), then release the compression lock."""
    try:
        event.cost = _summariser_cost(conversation, session_ids={event.session_id, session.id},
                                      since=event.started_at)
        event.phase = "done"
        event.duration_ms = int((time.monotonic() - started) * 1000)
        event.finished_at = timezone.now()
        event.save()
    finally:
        # Released once the event is closed: a running event without a live lease is one
        # whose worker stopped (the sweep closes those).
        lock_release(conversation_id=conversation.id, kind=COMPRESSION_LOCK, holder=holder)


def _request_sizes(conversation: Conversation, session: Session, cfg, engine, messages, result) -> tuple[int, int]:
    """The next request's projected size before and after (SPEC §3.4: tool schemas included, in the
    model's tokens), as the gauge shows it on either side of the compaction."""
    tools = pressure.offered_tools(cfg, engine, conversation).all
    before = pressure.projection_of(conversation, session, cfg, messages=messages, tools=tools)
    if result.status != "compressed":
        return before.tokens, before.tokens
    after = pressure.project(Session(), counted=pressure.counted_request(list(result.messages), tools),
                             ratio=before.ratio)
    return before.tokens, after.tokens


def _summariser_cost(conversation: Conversation, *, session_ids, since) -> Decimal:
    """What this compression's summariser calls cost (recorded as the calls were made)."""
    total = ApiCall.objects.filter(conversation=conversation, purpose="compression", session_id__in=session_ids,
                                   created_at__gte=since).aggregate(c=Sum("cost"))["c"]
    return total or Decimal(0)


def compression_preview(*, conversation_id, focus_topic: str | None = None) -> dict:
    """What a manual compression would do now, without changing anything."""
    conversation = Conversation.objects.get(id=conversation_id)
    session = session_active(conversation)
    cfg = runtime.current_config()
    engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
    return engine.preview(context_messages(session), focus_topic=focus_topic)
