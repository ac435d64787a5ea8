"""What both recall benchmarks (``fidelity.py``, ``fidelity_independent.py``) play a conversation on,
and how they measure the context it ends with.

- ``agent_stage``: a simulator started, Celery eager and the in-memory channel layer for the
  duration, ``context.engine`` saved as asked, and a new user with a new conversation on the
  simulator's ``model``, its session started. The simulator is stopped and Celery restored
  whatever happens inside.
- ``final_context``: the engine the next turn would use, the next request's messages and tools,
  its size in tokens, and the uncompacted conversation's size (every visible original after the
  system prompt), counted the same way.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class Stage:
    user: Any
    conversation: Any  # sessions.models.Conversation
    simulator_url: str


@dataclass
class FinalContext:
    cfg: Any
    session: Any
    engine: Any
    messages: list[dict]
    tools: list[dict]
    context_tokens: int
    uncompacted_tokens: int


@contextmanager
def agent_stage(engine_name: str, username: str, model: str, *, clock=None) -> Iterator[Stage]:
    """A conversation on a fresh simulator (on ``clock``, a ``SimClock``, when given)."""
    from django.contrib.auth import get_user_model
    from django.test import override_settings

    from compression import settings_store
    from hermes_web.celery import app
    from sessions.models import Conversation
    from sessions.services.context import session_start
    from simulator import start_simulator

    server = start_simulator(clock=clock) if clock is not None else start_simulator()
    eager = app.conf.task_always_eager
    try:
        with override_settings(HERMES_SIMULATOR_URL=server.base_url,
                               CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
            app.conf.task_always_eager = True
            settings_store.save_group("context", {"engine": engine_name})
            user = get_user_model().objects.create_user(f"{username}-{time.monotonic_ns()}")
            row = Conversation.objects.create(owner=user, provider="simulator", model=model)
            session_start(conversation=row)
            yield Stage(user, row, server.base_url)
    finally:
        app.conf.task_always_eager = eager
        server.stop()


def final_context(conversation) -> FinalContext:
    from sessions.models import Message
    from sessions.services import pressure, runtime
    from sessions.services.context import context_messages, session_active

    cfg = runtime.current_config()
    session = session_active(conversation)
    engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg)
    messages = context_messages(session)
    tools = pressure.offered_tools(cfg, engine).all
    originals = Message.objects.filter(conversation=conversation, visible=True, is_summary=False)
    uncompacted = engine.count_messages_tokens([messages[0], *(m.as_chat() for m in originals)])
    return FinalContext(cfg, session, engine, messages, tools, pressure.counted_request(messages, tools), uncompacted)
