"""The Celery app: queues `agent` (chat turns) and `compression` (compression jobs), on a Redis
broker transport that survives a Redis restart while a late-acknowledged task is running. Each
worker also runs two threads once ready: its heartbeat (for /healthz) and the stale-work sweep."""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time

from celery import Celery
from celery.signals import task_postrun, worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection, reset_queries
from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis

from hermes_web import allocator
from hermes_web.probes import WORKER_HEARTBEAT_PREFIX, WORKER_HEARTBEAT_TTL, redis_client

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, able to reach Redis after its transport was detached.

    When the broker connection drops, Celery's consumer (5.7) calls `Connection.collect()` and then
    `Connection.close()`. For Redis, `collect()` closes the channels, but closing the consuming
    channel stops at the pending BRPOP reply (the socket is dead), and `collect()` then detaches
    the transport (`transport.client = None`). The later `close()` finishes closing that channel:
    it restores the unacknowledged message of the running task (`task_acks_late`), builds a new
    connection pool from `transport.client.hostname` and raises AttributeError, which kombu does
    not treat as a connection error: the worker stops for good once its task ends. The task's own
    ack goes through the same closed channel. Remembering the connection parameters while the
    transport is attached lets both reach Redis (or fail with a connection error, which kombu and
    Celery handle) and the consumer reconnects.
    """

    def __init__(self, *args, **kwargs):
        self._params_while_attached: dict[bool, dict] = {}
        super().__init__(*args, **kwargs)
        self._connparams(asynchronous=False)  # remembered now, while the transport is attached

    def _connparams(self, asynchronous=False):
        transport = self.connection
        if transport is not None and transport.client is not None:
            self._params_while_attached[asynchronous] = super()._connparams(asynchronous=asynchronous)
        return dict(self._params_while_attached[asynchronous])


class RedisTransport(kombu_redis.Transport):
    Channel = RedisChannel


# redis:// and rediss:// broker URLs use this transport in every process that loads the app (the
# worker, the web processes publishing turns). Registered under kombu's own scheme names, so the
# URL scheme still selects it, rediss:// keeps kombu's TLS defaults and logs show redis:// URLs.
TRANSPORT_ALIASES["redis"] = TRANSPORT_ALIASES["rediss"] = "hermes_web.celery:RedisTransport"

app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

log = logging.getLogger(__name__)
_stop = threading.Event()
TRIM_INTERVAL = 10.0  # seconds between two malloc_trim calls of a process (a call takes 1-5 ms)
_last_trim = 0.0


def _heartbeat_loop(hostname: str) -> None:
    client = redis_client(settings.REDIS_URL)
    key = WORKER_HEARTBEAT_PREFIX + hostname
    while not _stop.is_set():
        try:
            client.set(key, "1", ex=WORKER_HEARTBEAT_TTL)
        except Exception:  # Redis briefly away: the key expires and /healthz says so
            pass
        _stop.wait(WORKER_HEARTBEAT_TTL / 3)
    try:
        client.delete(key)
    except Exception:
        pass


@task_postrun.connect
def _forget_queries(**kwargs) -> None:
    """Clear the query log of the thread that ran the task, as Django does when a request starts.

    With DEBUG=1 every database connection logs each query with its SQL and parameters rendered
    (message texts included; about 58 queries and 36 KB a turn), up to 9000 a connection, and
    only Django's request_started signal clears it. A worker serves no requests, and Celery's
    Django fixup closes connections after a task but keeps their logs: each pool thread's log
    filled up, and the worker's RSS with it (bench/soak.py --debug: 264 MB after 6 minutes
    without this, 233 MB with it, as with DEBUG off)."""
    reset_queries()


@task_postrun.connect
def _give_back_memory(**kwargs) -> None:
    """Return the C heaps' free pages to the system after a task, at most once every
    `TRIM_INTERVAL` seconds a process (hermes_web/allocator.py: a compaction's large strings
    otherwise leave their pages in the worker's arenas)."""
    global _last_trim
    now = time.monotonic()
    if now - _last_trim >= TRIM_INTERVAL:
        _last_trim = now
        allocator.trim()


def _sweep_loop() -> None:
    """The stale-work sweep of this worker (sessions.services.sweep), every HERMES_SWEEP_INTERVAL
    seconds; the first pass comes after a random part of an interval, so workers started together
    do not sweep in step."""
    # The sessions modules here are imported in the worker's threads, not at the top: this module
    # is loaded with the settings (hermes_web/__init__.py), before Django's apps are, and they
    # import models.
    from sessions.services.sweep import broker_client, sweep_interval, sweep_once

    interval = sweep_interval()
    if interval <= 0:
        return
    redis = broker_client()
    wait = random.uniform(0.2, 1.0) * interval
    while not _stop.wait(wait):
        wait = interval
        try:
            sweep_once(redis=redis)
        except Exception:  # the database away for a moment: the next pass tries again
            log.warning("the stale-work sweep failed", exc_info=True)
        finally:
            reset_queries()  # a long-lived thread: its query log (DEBUG) is never cleared otherwise
            connection.close()


def _mcp_loop() -> None:
    """The worker's MCP servers: connected (and their tools listed) now, again whenever an admin
    changes or reloads one, closed when one is switched off (sessions.agent.tools.mcp.client)."""
    from sessions.agent.tools.mcp.client import watch_forever  # as in _sweep_loop

    watch_forever(_stop)


@worker_ready.connect
def _start_heartbeat(sender=None, **kwargs) -> None:
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    threading.Thread(target=_heartbeat_loop, args=(hostname,), daemon=True, name="hermes-heartbeat").start()
    threading.Thread(target=_sweep_loop, daemon=True, name="hermes-sweep").start()
    threading.Thread(target=_mcp_loop, daemon=True, name="hermes-mcp").start()


@worker_shutdown.connect
def _stop_heartbeat(**kwargs) -> None:
    _stop.set()
    from sessions.agent.tools.mcp.client import CLIENTS  # as in _sweep_loop

    CLIENTS.close_all()  # each stdio server's process group goes with the worker
