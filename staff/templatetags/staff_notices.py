"""``{% codex_autoraise_notice conversation as notice %}``: the one-time Codex notice for the
requesting user (see ``staff.services.codex_autoraise_notice_for``). Rendering it records it."""
from __future__ import annotations

from django import template

from staff.services import codex_autoraise_notice_for

register = template.Library()


@register.simple_tag(takes_context=True)
def codex_autoraise_notice(context, conversation) -> str | None:
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    return codex_autoraise_notice_for(user, conversation)
