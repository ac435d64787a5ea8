"""The stale-work sweep: what a worker that stopped (SIGKILL, out of memory, a lost machine) or a
broker outage left behind is closed or run again about one lease later, without anyone asking.

One pass (`sweep_once`), in this order:
1. compression events left queued or running with no live compression lease: a running one is
   closed as failed ("interrupted: the worker stopped; nothing was changed"), a queued one is
   queued again under a new lease (`compaction.compression_recover`);
2. turns left running with no live turn lease: failed, "interrupted", and every open page told;
3. turns queued for more than `QUEUED_GRACE` seconds in a conversation with no live lease at all
   (the turn row is the source of truth; its task was lost with a worker or never published while
   the broker was down): their conversation's agent task is enqueued again. `agent_turn_run` is
   idempotent: it drains whatever is queued under the turn lease, and does nothing once done.

Every worker runs a pass every `HERMES_SWEEP_INTERVAL` seconds (a thread started when the worker
is ready, `hermes_web/celery.py`); `sessions.tasks.stale_sweep` runs one on demand. Several
sweepers at once are safe: each change is made while holding the conversation's lease, which
only one of them acquires, and a turn is enqueued again at most once per `DISPATCH_EVERY` seconds
across all workers (a Redis key set only if absent).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from sessions.models import CompressionEvent, ConversationLock, Turn
from sessions.services.attachments import attachments_sweep
from sessions.services.compaction import compression_recover
from sessions.services.enqueue import turn_run_signature
from sessions.services.locks import COMPRESSION_LOCK, TURN_LOCK, lock_acquire, lock_release
from sessions.services.turn_end import turn_fail

log = logging.getLogger(__name__)

# A queued turn younger than this may still have its task on the way (publish, prefetch).
QUEUED_GRACE = 10.0
# A turn enqueued again waits this long before it may be enqueued again (its task may simply be
# waiting for a free worker thread).
DISPATCH_EVERY = 60.0
DISPATCH_KEY = "hermes:sweep:turn:"

INTERRUPTED_TURN = ("The turn was interrupted: the worker running it stopped. Your messages are saved; "
                    "send your message again to retry.")


def sweep_interval() -> float:
    """Seconds between two passes in each worker; 0 turns the worker's sweep off."""
    return float(getattr(settings, "HERMES_SWEEP_INTERVAL", 10))


def turn_lease_ttl() -> float:
    return float(getattr(settings, "HERMES_TURN_LOCK_TTL", 30))


@dataclass
class SweepReport:
    broker: bool = False
    compressions_closed: list[int] = field(default_factory=list)
    compressions_requeued: list[int] = field(default_factory=list)
    turns_failed: list[int] = field(default_factory=list)
    turns_requeued: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.compressions_closed or self.compressions_requeued or self.turns_failed or self.turns_requeued)

    def as_dict(self) -> dict:
        return {"broker": self.broker, "compressions_closed": self.compressions_closed,
                "compressions_requeued": self.compressions_requeued, "turns_failed": self.turns_failed,
                "turns_requeued": self.turns_requeued}


def broker_client():
    """A Redis client on the broker that fails fast (one attempt, 1 s to connect)."""
    return Redis.from_url(settings.CELERY_BROKER_URL, retry=Retry(NoBackoff(), 0),
                                socket_connect_timeout=1, socket_timeout=2)


def sweep_once(*, redis=None) -> SweepReport:
    """One pass over the stale work of every conversation; see the module's docstring."""
    redis = redis if redis is not None else broker_client()
    report = SweepReport(broker=_reachable(redis))
    _compressions(report)
    _running_turns(report)
    if report.broker:
        _queued_turns(report, redis)
    _unsent_attachments()
    if report:
        log.info("stale-work sweep: %s", report.as_dict())
    return report


def _unsent_attachments() -> None:
    """Files uploaded and never sent, past HERMES_ATTACHMENT_PENDING_HOURS (an upload also sweeps
    them; this catches an installation where nobody uploads any more)."""
    try:
        attachments_sweep()
    except Exception:
        log.warning("the sweep of unsent attachments failed", exc_info=True)


def _reachable(redis) -> bool:
    try:
        return bool(redis.ping())
    except Exception:
        return False


def _live_leases(kind: str | None = None):
    leases = ConversationLock.objects.filter(expires_at__gt=timezone.now())
    if kind is not None:
        leases = leases.filter(kind=kind)
    return leases.values("conversation_id")


def _compressions(report: SweepReport) -> None:
    stale = (CompressionEvent.objects.filter(status__in=("queued", "running"))
             .exclude(conversation_id__in=_live_leases(COMPRESSION_LOCK))
             .order_by().values_list("conversation_id", flat=True).distinct())
    for conversation_id in set(stale):
        try:
            outcome = compression_recover(conversation_id=conversation_id, rerun=report.broker)
        except Exception:
            log.exception("recovering the compressions of conversation %s failed", conversation_id)
            continue
        report.compressions_closed += outcome["closed"]
        if outcome["requeued"] is not None:
            report.compressions_requeued.append(outcome["requeued"])


def _running_turns(report: SweepReport) -> None:
    stale = (Turn.objects.filter(status="running").exclude(conversation_id__in=_live_leases(TURN_LOCK))
             .order_by().values_list("conversation_id", flat=True).distinct())
    for conversation_id in set(stale):
        holder = lock_acquire(conversation_id=conversation_id, kind=TURN_LOCK, ttl=turn_lease_ttl())
        if holder is None:
            continue  # a worker took the lease meanwhile: the turn is its again
        try:
            for turn in Turn.objects.filter(conversation_id=conversation_id, status="running").order_by("id"):
                log.warning("turn %s of conversation %s was interrupted (its worker stopped)", turn.id,
                            conversation_id)
                # As a turn that fails ends: its open tool calls answered, the page told.
                turn_fail(turn, INTERRUPTED_TURN)
                report.turns_failed.append(turn.id)
        except Exception:
            log.exception("closing the interrupted turns of conversation %s failed", conversation_id)
        finally:
            lock_release(conversation_id=conversation_id, kind=TURN_LOCK, holder=holder)


def _queued_turns(report: SweepReport, redis) -> None:
    """Enqueue the oldest queued turn of each conversation nobody is working on."""
    cutoff = timezone.now() - timedelta(seconds=QUEUED_GRACE)
    waiting = (Turn.objects.filter(status="queued", created_at__lte=cutoff)
               .exclude(conversation_id__in=_live_leases())  # a drain or a compression goes first
               .order_by("id").values_list("conversation_id", "id"))
    first: dict = {}
    for conversation_id, turn_id in waiting:
        first.setdefault(conversation_id, turn_id)
    for conversation_id, turn_id in first.items():
        key = f"{DISPATCH_KEY}{turn_id}"
        try:
            if not redis.set(key, "1", nx=True, ex=int(DISPATCH_EVERY)):
                continue  # enqueued again moments ago, by this worker or another
            turn_run_signature(turn_id).apply_async()
        except Exception:
            log.warning("enqueueing queued turn %s again failed; the next pass tries again", turn_id, exc_info=True)
            try:
                redis.delete(key)
            except Exception:
                pass
            return  # the broker is away: the rest waits for the next pass too
        report.turns_requeued.append(turn_id)
        log.warning("turn %s of conversation %s was queued with no task; enqueued again", turn_id, conversation_id)
