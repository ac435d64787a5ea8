"""Read-side queries. Every lookup of a conversation goes through the owner check here."""
from __future__ import annotations

from sessions.models import Conversation


def conversation_get_for_user(*, user, conversation_id) -> Conversation | None:
    return Conversation.objects.filter(id=conversation_id, owner=user).first()


def conversation_list_for_user(*, user):
    return Conversation.objects.filter(owner=user).order_by("-last_activity_at")


def live_state_html(*, conversation: Conversation) -> str:
    """The live panels rendered from the database, sent to a socket on (re)connect."""
    from sessions import fragments

    return fragments.render_live_state(conversation)
