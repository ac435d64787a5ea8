"""What the model sees: the active session's context built from the database, appending messages
with their token count computed once, and building the session's engine from settings + state."""
from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from compression.core.tokens import compute_message_tokens
from sessions.models import Conversation, Message, Session

SYSTEM_PROMPT = (
    "You are Hermes, an assistant that works on files in the user's workspace with the tools "
    "read_file, write_file, list_files and search_files (and terminal when an administrator "
    "enabled it). Use a tool when the user asks about files; answer concisely and concretely."
)


def session_active(conversation: Conversation) -> Session:
    session = conversation.sessions.filter(ended_at__isnull=True).order_by("-id").first()
    if session is None:
        session = Session.objects.create(conversation=conversation, system_prompt=SYSTEM_PROMPT)
    return session


def session_start(*, conversation: Conversation) -> Session:
    return Session.objects.create(conversation=conversation, system_prompt=SYSTEM_PROMPT)


def context_rows(session: Session):
    return session.messages.filter(archived=False).order_by("seq")


def context_messages(session: Session) -> list[dict]:
    """System prompt first, then the session's live messages (with stored token counts)."""
    messages = [{"role": "system", "content": session.system_prompt or SYSTEM_PROMPT}]
    messages.extend(m.as_chat() for m in context_rows(session))
    return messages


def next_seq(session: Session) -> int:
    """The session's next `seq`. Only meaningful while holding the append lock (`message_append`)."""
    top = session.messages.aggregate(top=Max("seq"))["top"]
    return 0 if top is None else top + 1


def message_append(*, session: Session, role: str, content, tool_calls=None, tool_call_id: str = "", name: str = "",
                   visible: bool = True, is_summary: bool = False, seq: int | None = None) -> Message:
    """Store a message at the end of the session: `seq` is MAX + 1 read and written under one lock,
    and unique per session (the database refuses a duplicate)."""
    chat = {"role": role, "content": content}
    if tool_calls:
        chat["tool_calls"] = tool_calls
    if tool_call_id:
        chat["tool_call_id"] = tool_call_id
    if name:
        chat["name"] = name
    token_count = compute_message_tokens(chat)
    with transaction.atomic():
        # Appenders to one conversation take turns, holding the lock until their transaction ends.
        # PostgreSQL: the conversation row (the lock a model switch takes first, and turn_submit
        # updates after appending, so no two transactions wait on each other in opposite order).
        # SQLite: transactions begin IMMEDIATE (hermes_web/config.py), holding the database's write
        # lock before MAX(seq) is read; SELECT ... FOR UPDATE is a no-op there.
        list(Conversation.objects.select_for_update(no_key=True).filter(pk=session.conversation_id).values_list("pk"))
        return Message.objects.create(
            conversation_id=session.conversation_id, session=session, seq=next_seq(session) if seq is None else seq,
            role=role, content=content, tool_calls=tool_calls or None, tool_call_id=tool_call_id or "", name=name or "",
            token_count=token_count, visible=visible, is_summary=is_summary,
        )
