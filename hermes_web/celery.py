"""The Celery app: queues `agent` (chat turns) and `compression` (compression jobs)."""
from __future__ import annotations

import os
import socket
import threading

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")

app = Celery("hermes_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_stop = threading.Event()


def _heartbeat_loop(hostname: str) -> None:
    from django.conf import settings

    from hermes_web.probes import WORKER_HEARTBEAT_PREFIX, WORKER_HEARTBEAT_TTL, redis_client

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


@worker_ready.connect
def _start_heartbeat(sender=None, **kwargs) -> None:
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    threading.Thread(target=_heartbeat_loop, args=(hostname,), daemon=True, name="hermes-heartbeat").start()


@worker_shutdown.connect
def _stop_heartbeat(**kwargs) -> None:
    _stop.set()
