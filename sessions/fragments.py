"""One render function per fragment, used by the page views and by the websocket pushes."""
from __future__ import annotations

from django.template.loader import render_to_string


def render_notice(text: str, *, level: str = "info") -> str:
    return render_to_string("sessions/_notice.html", {"text": text, "level": level, "oob": True})


def render_live_state(conversation) -> str:
    return ""
