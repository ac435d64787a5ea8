"""The Channels layer: channels_redis with a bounded, blocking connection pool.

channels_redis builds a plain `ConnectionPool` per event loop; under redis-py 8 that pool never
closes what it opened and raises "Too many connections" past 100, so a burst of 200 websocket
disconnects leaves ~100 idle connections and stale group members. A blocking pool caps the
connections and makes a burst wait its turn instead.

A connection given to a pool that redis-py did not build itself retries nothing, and the pool
hands out a pooled connection whose server has gone without noticing. After a Redis restart the
first command on each pooled connection (a worker's broadcast, a socket's group_add) failed with
"Connection closed by server". Each command now retries once on a connection error: redis-py
drops the dead socket and sends the command again on a new one.
"""
from __future__ import annotations

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError


def stale_connection_retry() -> Retry:
    """One immediate retry, for connection errors only: a timeout may mean the command ran."""
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


class HermesChannelLayer(RedisChannelLayer):
    def create_pool(self, index):
        host = dict(self.hosts[index])
        address = host.pop("address")
        host.setdefault("retry", stale_connection_retry())
        return BlockingConnectionPool.from_url(address, **host)
