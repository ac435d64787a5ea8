"""What the model sees: the active session's context built from the database, appending messages
with their token count computed once, and building the session's engine from settings + state."""
from __future__ import annotations

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
    top = session.messages.aggregate(top=Max("seq"))["top"]
    return 0 if top is None else top + 1


def message_append(*, session: Session, role: str, content, tool_calls=None, tool_call_id: str = "", name: str = "",
                   visible: bool = True, is_summary: bool = False, seq: int | None = None) -> Message:
    chat = {"role": role, "content": content}
    if tool_calls:
        chat["tool_calls"] = tool_calls
    if tool_call_id:
        chat["tool_call_id"] = tool_call_id
    if name:
        chat["name"] = name
    return Message.objects.create(
        conversation_id=session.conversation_id, session=session, seq=next_seq(session) if seq is None else seq,
        role=role, content=content, tool_calls=tool_calls or None, tool_call_id=tool_call_id or "", name=name or "",
        token_count=compute_message_tokens(chat), visible=visible, is_summary=is_summary,
    )
