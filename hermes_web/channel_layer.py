"""The Channels layer: channels_redis with a bounded, blocking connection pool.

channels_redis builds a plain `ConnectionPool` per event loop; under redis-py 8 that pool never
closes what it opened and raises "Too many connections" past 100, so a burst of 200 websocket
disconnects leaves ~100 idle connections and stale group members. A blocking pool caps the
connections and makes a burst wait its turn instead.
"""
from __future__ import annotations

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class HermesChannelLayer(RedisChannelLayer):
    def create_pool(self, index):
        host = dict(self.hosts[index])
        address = host.pop("address")
        return BlockingConnectionPool.from_url(address, **host)
