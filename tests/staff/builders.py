"""ORM builders for the staff tests: rows exactly as the services would have stored them."""
from __future__ import annotations

from decimal import Decimal

from sessions.models import ApiCall, CompressionEvent, Conversation, Session


def conversation(owner, **kw) -> Conversation:
    return Conversation.objects.create(owner=owner, **kw)


def session(conv: Conversation, **kw) -> Session:
    return Session.objects.create(conversation=conv, **kw)


def call(conv: Conversation, *, prompt: int, read: int = 0, cost: str = "0", nocache: str = "0", **kw) -> ApiCall:
    return ApiCall.objects.create(conversation=conv, provider="simulator", model=conv.model, prompt_tokens=prompt,
                                  cache_read_tokens=read, input_tokens=prompt - read, cost=Decimal(cost),
                                  cost_without_cache=Decimal(nocache), **kw)


def event(conv: Conversation, sess: Session, *, status: str, trigger: str = "preflight", **kw) -> CompressionEvent:
    return CompressionEvent.objects.create(conversation=conv, session=sess, status=status, trigger=trigger, **kw)
