"""Publishing for the live fan-out benchmark, from a thread of its own (its own event loop and
Redis connections): direct ``group_send``, one Celery task per event, and the worker stream task."""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time


class Publisher:
    """group_send on a dedicated loop thread; Celery enqueues on a dedicated thread. Each records
    time.perf_counter() right before publishing an event."""

    def __init__(self, redis_url: str, *, one_by_one: bool = False) -> None:
        from celery import Celery

        from hermes_web.channel_layer import HermesChannelLayer
        from hermes_web.config import channel_layers

        self.one_by_one = one_by_one  # the worker stream pushes each delta alone instead of a round at once
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="lfb-publisher", daemon=True)
        self.thread.start()
        # The product's CHANNEL_LAYERS config (hermes_web/settings.py).
        self.layer = HermesChannelLayer(**channel_layers(redis_url)["default"]["CONFIG"])
        # Only a producer: the worker runs the real sessions.tasks.conversation_notify, routed as
        # CELERY_TASK_ROUTES routes it ("sessions.tasks.conversation_*" -> queue "compression").
        # The result backend returns what the stream task saw (publish window, broadcast times).
        # Not the current app: the product's shared tasks resolve through the current app, and a run in
        # the same process (a test session) would send them to this benchmark's Redis once it is gone.
        self.celery = Celery("lfb", broker=redis_url, backend=redis_url, set_as_current=False)
        self.celery.conf.broker_connection_retry_on_startup = True
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="lfb-celery")

    async def _group_send(self, items: list[tuple[str, str, str]]) -> dict[str, float]:
        sent = {}
        for group, event_id, html in items:
            sent[event_id] = time.perf_counter()
            await self.layer.group_send(group, {"type": "conversation.event", "kind": "notice", "html": html})
        return sent

    def _enqueue(self, items: list[tuple[str, str]]) -> dict[str, float]:
        sent = {}
        for conversation_id, event_id in items:
            sent[event_id] = time.perf_counter()
            self.celery.send_task("sessions.tasks.conversation_notify", args=[conversation_id, event_id],
                                  queue="compression")
        return sent

    def _stream(self, conversation_ids: list[str], events: int, interval: float, run_id: str,
                wait: float) -> dict:
        # The product's turns run on the "agent" queue.
        result = self.celery.send_task("bench.fanout_tasks.stream_events",
                                       args=[conversation_ids, events, interval, run_id, self.one_by_one],
                                       queue="agent")
        try:
            return result.get(timeout=wait)
        finally:
            result.forget()

    async def stream(self, conversation_ids: list[str], events: int, interval: float, run_id: str,
                     wait: float = 120.0) -> dict:
        """Run the worker stream; return the task's report once it published its last event."""
        return await asyncio.get_running_loop().run_in_executor(
            self.executor, self._stream, conversation_ids, events, interval, run_id, wait)

    async def group_send(self, items: list[tuple[str, str, str]]) -> dict[str, float]:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._group_send(items), self.loop))

    async def enqueue(self, items: list[tuple[str, str]]) -> dict[str, float]:
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._enqueue, items)

    def close(self) -> None:
        try:
            if self.thread.is_alive():
                asyncio.run_coroutine_threadsafe(self.layer.close_pools(), self.loop).result(timeout=5)
        except Exception:
            pass
        try:
            self.executor.submit(self.celery.close).result(timeout=5)
        except Exception:
            pass
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()
