"""Submitting a chat turn (web side): check the input, run gateway hygiene (SPEC §5.1), store the
message and its queued turn, and enqueue the agent task on commit. The turn itself runs on a
worker (`sessions.agent.loop`); one turn at a time per conversation, later turns wait in order.
"""
from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compression.core.hygiene import hygiene_decision
from compression.core.tokens import estimate_messages_tokens_rough
from sessions import live, selectors
from sessions.models import Conversation, Message, Session, Turn
from sessions.services import runtime
from sessions.services.compaction import compression_request
from sessions.services.context import context_messages, message_append, session_active
from sessions.tasks import agent_turn_run as agent_turn_run_task


class TurnRejected(Exception):
    """The message cannot be accepted; the text says why and nothing was stored."""


def hygiene_check(*, conversation: Conversation, session: Session, cfg):
    history = context_messages(session)[1:]
    window = runtime.session_window(conversation, session, cfg)
    return hygiene_decision(
        message_count=len(history), context_length=window, last_prompt_tokens=max(0, session.last_prompt_tokens),
        rough_tokens=estimate_messages_tokens_rough(history), enabled=cfg.compression.enabled,
        hard_message_limit=cfg.compression.hygiene_hard_message_limit,
    )


def turn_submit(*, user, conversation_id, text: str) -> tuple[Turn, Message]:
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise TurnRejected("No such conversation.")
    text = (text or "").strip()
    if not text:
        raise TurnRejected("The message is empty.")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise TurnRejected(f"The message is too long: {len(text):,} characters (the limit is {limit:,}). "
                           "Put large content in a file in the workspace and ask the agent to read it.")
    cfg = runtime.current_config()
    with transaction.atomic():
        session = session_active(conversation)
        decision = hygiene_check(conversation=conversation, session=session, cfg=cfg)
        message = message_append(session=session, role="user", content=text)
        turn = Turn.objects.create(conversation=conversation, user_message=message)
        # Every open page of the conversation shows the message at once (the form only clears).
        transaction.on_commit(lambda: live.message_added(message))
        transaction.on_commit(lambda: live.turn_changed(turn))
        conversation.last_activity_at = timezone.now()
        if conversation.title == "New conversation":
            conversation.title = text[:60]
        conversation.save(update_fields=["last_activity_at", "title"])
        if decision.fire:
            # Hygiene compacts first; the turn follows the compression job.
            compression_request(conversation_id=conversation.id, trigger="hygiene", then_turn=turn.id)
        else:
            transaction.on_commit(lambda: agent_turn_run_task.delay(turn.id))
    return turn, message
