"""Leases in the database: acquired atomically, refreshed while held, expiring on their own when a
holder dies (a SIGKILLed worker blocks a conversation for at most one lease)."""
from __future__ import annotations

import contextlib
import threading
import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions.models import ConversationLock

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


@contextlib.contextmanager
def lease_kept(*, conversation_id, kind: str, holder: str, ttl: float):
    """Refresh a held lease every ttl/3 seconds from a background thread while the block runs
    (a long summariser call must not let the lease lapse; a killed worker stops refreshing)."""
    from django.db import connection

    stop = threading.Event()

    def keep() -> None:
        try:
            while not stop.wait(ttl / 3):
                lock_refresh(conversation_id=conversation_id, kind=kind, holder=holder, ttl=ttl)
        finally:
            connection.close()

    thread = threading.Thread(target=keep, daemon=True, name=f"lease-{kind}-{conversation_id}")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
