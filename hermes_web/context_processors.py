"""What every page's template needs from the request beyond Django's own: the colour theme the
user chose (auto, light or dark), put on `<html data-theme=…>` by templates/base.html.

The theme is read once per request and only when a template uses it: fragments rendered for a
push or an htmx swap do not pay for it.
"""
from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from sessions.services.preferences import user_theme

# (value, button label, what it means): the top bar's toggle.
THEME_CHOICES = [
    ("auto", "Auto", "Follow the system's light or dark setting"),
    ("light", "Light", "Always light"),
    ("dark", "Dark", "Always dark"),
]


def theme(request) -> dict:
    return {"theme": SimpleLazyObject(lambda: user_theme(getattr(request, "user", None))),
            "theme_choices": THEME_CHOICES}
