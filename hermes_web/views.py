"""Project-level views: the health probe (status for anyone, the parts only for staff or the
metrics bearer token: they name hosts and errors)."""
from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from hermes_web.probes import WORKER_HEARTBEAT_PREFIX, redis_client
from staff.views import metrics_token_ok


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "vendor": connection.vendor}
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}


def _redis_and_workers() -> tuple[dict, dict]:
    try:
        client = redis_client(settings.REDIS_URL)
        started = time.monotonic()
        client.ping()
        latency_ms = round((time.monotonic() - started) * 1000, 1)
        workers = sorted(k.decode()[len(WORKER_HEARTBEAT_PREFIX):] for k in client.scan_iter(WORKER_HEARTBEAT_PREFIX + "*"))
    except Exception as exc:
        return {"ok": False, "error": type(exc).__name__}, {"ok": False, "alive": []}
    return {"ok": True, "latency_ms": latency_ms}, {"ok": bool(workers), "alive": workers}


@login_not_required
@never_cache
@require_GET
def healthz(request):
    database = _database()
    redis, workers = _redis_and_workers()
    ok = database["ok"] and redis["ok"] and workers["ok"]
    body = {"status": "ok" if ok else "degraded"}
    if (request.user.is_authenticated and request.user.is_staff) or metrics_token_ok(request):
        body.update(database=database, redis=redis, workers=workers)
    return JsonResponse(body, status=200 if ok else 503)
