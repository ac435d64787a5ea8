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

channels_redis receives a process's events one at a time (a cleanup script, BZPOPMIN, a ZADD to
the in-flight backup and a ZPOPMIN from it, each a round trip) and hands them over through a lock
that every waiting consumer races for with two new tasks, so a round of 200 deltas landing at once
meant some 1,000 task creations, cancellations and wake-ups before the last consumer had its event.
Here one reader task per process pops up to ``receive_batch`` events a round trip (a script that
also restores a backup an older receive left) and puts each in its channel's queue; a consumer's
receive is a wait on its own queue; only an empty channel falls back to one blocking pop. Events
popped this way wait in the process until their consumers take them, not in Redis's backup: lost
if the process dies first, like an event already relayed (a page re-renders from the database when
its socket reconnects). bench/live_fanout.py prints the Daphne CPU each relayed event costs.
"""
from __future__ import annotations

import asyncio
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


class _Failed:
    """A receive that cannot be answered: the reader's error, handed to each waiting consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class HermesChannelLayer(RedisChannelLayer):
    receive_batch = 100

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: collections.Counter = collections.Counter()  # process-local channel -> receives waiting
        self._reader: asyncio.Task | None = None

    async def receive(self, channel):
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel)
        real_channel = self.non_local_name(channel)
        assert real_channel.endswith(self.client_prefix + "!"), "Wrong client prefix"
        queue = self.receive_buffer[channel]
        self._waiting[channel] += 1
        try:
            if queue.empty():
                self._ensure_reader(real_channel)
            item = await queue.get()
        finally:
            self._waiting[channel] -= 1
            if not self._waiting[channel]:
                del self._waiting[channel]
                if queue.empty() and self.receive_buffer.get(channel) is queue:
                    del self.receive_buffer[channel]
        if isinstance(item, _Failed):
            raise item.error
        return item

    def _ensure_reader(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader
        if reader is not None and not reader.done():
            if reader.get_loop() is loop:
                return
            if not reader.get_loop().is_closed():
                raise RuntimeError("Two event loops are trying to receive() on one channel layer at once!")
        self._reader = loop.create_task(self._read(real_channel), name="channel-layer-reader")

    async def _read(self, real_channel: str) -> None:
        """Pop the process's events into their channels' queues while anyone waits for one."""
        try:
            while self._waiting:
                for channel, message in await self._next_events(real_channel):
                    for target in channel if isinstance(channel, list) else [channel]:
                        self.receive_buffer[target].put_nowait(message)
        except Exception as error:  # Redis gone: each waiting receive raises it, as channels_redis's do
            for channel in list(self._waiting):
                self.receive_buffer[channel].put_nowait(_Failed(error))

    async def _next_events(self, real_channel: str) -> list:
        """Up to ``receive_batch`` events in one round trip; when there are none, one blocking pop
        that gives up after ``brpop_timeout`` seconds (then: [])."""
        key = self.prefix + real_channel
        connection = self.connection(self.consistent_hash(real_channel))
        popped = await connection.eval(POP_MANY, 2, key, self._backup_channel_name(key), self.receive_batch)
        contents = popped[0::2]  # member, score, member, score...
        if not contents:
            # No backup of the popped event, unlike channels_redis's receive: the reader is only
            # cancelled when the process closes its pools, and the event is handed over at once.
            blocked = await connection.bzpopmin(key, timeout=self.brpop_timeout)
            contents = [blocked[1]] if blocked else []
        events = []
        for content in contents:
            message = self.deserialize(content)
            events.append((message.pop("__asgi_channel__", real_channel), message))
        return events

    async def close_pools(self):
        """Stop this loop's reader first (a blocking pop keeps its event in Redis's backup)."""
        reader = self._reader
        if reader is not None and not reader.done() and reader.get_loop() is asyncio.get_running_loop():
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        await super().close_pools()

    def create_pool(self, index):
        host = dict(self.hosts[index])
        address = host.pop("address")
        host.setdefault("retry", stale_connection_retry())
        return BlockingConnectionPool.from_url(address, **host)
