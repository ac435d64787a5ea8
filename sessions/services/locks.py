"""Leases in the database: acquired atomically, refreshed while held, expiring on their own when a
holder dies (a SIGKILLed worker blocks a conversation for at most one lease, about 30 s).

A lease is short and kept alive by a heartbeat (`lease_kept`) while its work runs; the stale-work
sweep (`sessions.services.sweep`) treats an expired lease as a holder that died."""
from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from datetime import timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from sessions.models import ConversationLock

log = logging.getLogger(__name__)

# The kinds of lease: one running turn and one running compression per conversation.
TURN_LOCK = "turn"
COMPRESSION_LOCK = "compression"


def lock_acquire(*, conversation_id, kind: str, ttl: float, holder: str | None = None) -> str | None:
    """The holder token when acquired, None when someone else holds an unexpired lease."""
    holder = holder or uuid.uuid4().hex
    now = timezone.now()
    expires = now + timedelta(seconds=ttl)
    # Take over an expired lease with one conditional UPDATE (atomic on every backend).
    taken = ConversationLock.objects.filter(conversation_id=conversation_id, kind=kind, expires_at__lte=now).update(
        holder=holder, expires_at=expires)
    if taken:
        return holder
    try:
        with transaction.atomic():
            ConversationLock.objects.create(conversation_id=conversation_id, kind=kind, holder=holder, expires_at=expires)
        return holder
    except IntegrityError:
        return None


def lock_refresh(*, conversation_id, kind: str, holder: str, ttl: float) -> bool:
    expires = timezone.now() + timedelta(seconds=ttl)
    return bool(ConversationLock.objects.filter(conversation_id=conversation_id, kind=kind, holder=holder).update(
        expires_at=expires))


def lock_release(*, conversation_id, kind: str, holder: str) -> None:
    ConversationLock.objects.filter(conversation_id=conversation_id, kind=kind, holder=holder).delete()


class Lease:
    """What `lease_kept` yields: `lost` is set once a refresh finds the lease taken by another
    holder (it had expired), so the work it guarded is no longer exclusive."""

    def __init__(self) -> None:
        self.lost = threading.Event()


@contextlib.contextmanager
def lease_kept(*, conversation_id, kind: str, holder: str, ttl: float):
    """Refresh a held lease every ttl/3 seconds from a background thread while the block runs, so
    a long model or summariser call never lets it lapse while a killed worker stops refreshing and
    its lease expires within `ttl`. A refresh that fails (the database busy or away for a moment)
    is tried again at the next beat; the lease survives two missed beats."""
    stop = threading.Event()
    lease = Lease()

    def keep() -> None:
        try:
            while not stop.wait(ttl / 3):
                try:
                    if not lock_refresh(conversation_id=conversation_id, kind=kind, holder=holder, ttl=ttl):
                        if not lease.lost.is_set():
                            log.warning("the %s lease of conversation %s was taken by another holder",
                                        kind, conversation_id)
                        lease.lost.set()
                except Exception:
                    log.warning("refreshing the %s lease of conversation %s failed; trying again",
                                kind, conversation_id, exc_info=True)
                    connection.close()  # a broken connection is replaced at the next beat
        finally:
            connection.close()

    thread = threading.Thread(target=keep, daemon=True, name=f"lease-{kind}-{conversation_id}")
    thread.start()
    try:
        yield lease
    finally:
        stop.set()
        thread.join(timeout=5)
