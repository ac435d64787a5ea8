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

channels_redis receives a process's events one at a time: a cleanup script, BZPOPMIN, a ZADD to
the in-flight backup and a ZPOPMIN from it, each a round trip, the next receive waiting for the
last one, so a round of 200 deltas landing at once left one Daphne relaying them one after
another (bench/live_fanout.py: stream p99 at 50 sockets 861 ms, 33 ms with the change). Here one
script restores the backup and pops up to ``receive_batch`` events of the process's channel;
only an empty channel falls back to the blocking receive. Events popped this way wait in the
process until its consumers take them, not in Redis's backup: lost if the process dies first,
like an event already relayed (a page re-renders from the database when its socket reconnects).
"""
from __future__ import annotations

import collections

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError


def stale_connection_retry() -> Retry:
    """One immediate retry, for connection errors only: a timeout may mean the command ran."""
    return Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))


POP_MANY = """
local backed_up = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = #backed_up, 1, -2 do
    redis.call('ZADD', KEYS[1], backed_up[i], backed_up[i - 1])
end
redis.call('DEL', KEYS[2])
return redis.call('ZPOPMIN', KEYS[1], ARGV[1])
"""


class HermesChannelLayer(RedisChannelLayer):
    receive_batch = 100

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._ready: collections.deque = collections.deque()  # (channel, message), oldest first

    async def receive_single(self, channel):
        """The next event of a process-local channel ("name!..."), many taken in one round trip."""
        if "!" not in channel:
            return await super().receive_single(channel)
        if self._ready:
            return self._ready.popleft()
        key = self.prefix + channel
        await self.receive_clean_locks.acquire(key)
        try:
            popped = await self.connection(self.consistent_hash(channel)).eval(
                POP_MANY, 2, key, self._backup_channel_name(key), self.receive_batch)
        finally:
            self.receive_clean_locks.release(key)
        if not popped:
            return await super().receive_single(channel)
        for content in popped[0::2]:
            message = self.deserialize(content)
            self._ready.append((message.pop("__asgi_channel__", channel), message))
        return self._ready.popleft()

    def create_pool(self, index):
        host = dict(self.hosts[index])
        address = host.pop("address")
        host.setdefault("retry", stale_connection_retry())
        return BlockingConnectionPool.from_url(address, **host)
