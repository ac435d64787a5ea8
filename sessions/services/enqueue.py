"""Handing work to a worker from a web request without waiting on an absent broker.

A request that enqueues (a send, a manual or hygiene compression) must answer fast even when
Redis is away: the task goes out on its own broker connection with short socket timeouts and one
quick retry, and without a result-backend subscription (nothing waits on these results;
subscribing retries for ~19 s while Redis is down). The database row (a queued turn, a queued
compression event) is the source of truth: when the broker cannot be reached it stays queued and
the worker's sweep hands it over once the broker is back.

Services name the tasks they enqueue (`turn_run_signature` and its neighbours) and never import
`sessions.tasks`, which imports the services it runs: the task modules sit above the services.
The names are the ones `sessions/tasks.py` registers; `CELERY_TASK_ROUTES` routes them by name
(`sessions.tasks.agent_*` to the `agent` queue, the others here to `compression`).
"""
from __future__ import annotations

import logging

from celery import Signature, current_app

log = logging.getLogger(__name__)

TURN_RUN = "sessions.tasks.agent_turn_run"
COMPRESSION_RUN = "sessions.tasks.compression_run"
TITLE_MAKE = "sessions.tasks.conversation_title_make"

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


def _signature(name: str, *args) -> Signature:
    # current_app is the project's Celery app (hermes_web/celery.py, loaded with the settings);
    # sessions does not import hermes_web. Immutable, as `.si()`: a chained job ignores the result
    # of the one before it.
    return current_app.signature(name, args=args, immutable=True)


def turn_run_signature(turn_id: int) -> Signature:
    """The task that runs the queued turns of `turn_id`'s conversation (queue `agent`)."""
    return _signature(TURN_RUN, turn_id)


def compression_run_signature(event_id: int, holder: str, force: bool = False) -> Signature:
    """The job of a queued compression event, under the lease `holder` took (queue `compression`)."""
    return _signature(COMPRESSION_RUN, event_id, holder, force)


def title_make_signature(conversation_id: str) -> Signature:
    """The auxiliary model's title for a conversation after its first exchange (queue `compression`)."""
    return _signature(TITLE_MAKE, conversation_id)
