"""Handing work to a worker from a web request without waiting on an absent broker.

A request that enqueues (a send, a manual or hygiene compression) must answer fast even when
Redis is away: the task goes out on its own broker connection with short socket timeouts and one
quick retry, and without a result-backend subscription (nothing waits on these results;
subscribing retries for ~19 s while Redis is down). The database row (a queued turn, a queued
compression event) is the source of truth: when the broker cannot be reached it stays queued and
the worker's sweep hands it over once the broker is back.
"""
from __future__ import annotations

import logging

log = logging.getLogger(__name__)

ENQUEUE_SOCKET_TIMEOUT = 1.0
ENQUEUE_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


def enqueue_fast(signature, *, what: str) -> bool:
    """Send a Celery signature (a task or a chain). True when the broker took it; False (logged,
    naming `what`) when it could not be reached."""
    app = signature.app
    try:
        with app.connection_for_write(
                connect_timeout=ENQUEUE_SOCKET_TIMEOUT,
                transport_options={"socket_connect_timeout": ENQUEUE_SOCKET_TIMEOUT,
                                   "socket_timeout": ENQUEUE_SOCKET_TIMEOUT}) as connection:
            signature.apply_async(connection=connection, ignore_result=True, retry=True,
                                  retry_policy=ENQUEUE_RETRY_POLICY)
    except Exception as exc:  # kombu's OperationalError, a socket error: the broker is away
        log.warning("%s stays queued: the task queue is unreachable (%s)", what, exc)
        return False
    return True
