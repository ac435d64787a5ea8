"""Cheap liveness probes shared by the system checks, /healthz and the launcher."""
from __future__ import annotations

import time

WORKER_HEARTBEAT_PREFIX = "hermes:worker:heartbeat:"
WORKER_HEARTBEAT_TTL = 30


def redis_client(url: str):
    """A client that fails at once on a refused connection (redis-py >= 6 retries for ~4 s)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(url, retry=Retry(NoBackoff(), 0), socket_connect_timeout=1, socket_timeout=2)


def redis_ping(url: str, wait: float = 0.0) -> str | None:
    """None when Redis answers PING, else the reason. Waits up to `wait` seconds for it to come up."""
    deadline = time.monotonic() + wait
    while True:
        try:
            redis_client(url).ping()
            return None
        except Exception as exc:  # any redis/socket error means "not reachable"
            reason = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            return reason
        time.sleep(0.2)
