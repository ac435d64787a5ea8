"""What every page's template needs from the request beyond Django's own: the colour theme the
user chose (auto, light or dark), put on `<html data-theme=…>` by templates/base.html.

The theme is read once per request and only when a template uses it: fragments rendered for a
push or an htmx swap do not pay for it.
"""
from __future__ import annotations

from django.utils.functional import SimpleLazyObject

from sessions.models import UserPreference

# (value, button label, what it means): the top bar's toggle.
THEME_CHOICES = [
    ("auto", "Auto", "Follow the system's light or dark setting"),
    ("light", "Light", "Always light"),
    ("dark", "Dark", "Always dark"),
]
THEMES = {value for value, _, _ in THEME_CHOICES}
DEFAULT_THEME = "auto"


def theme_for(user) -> str:
    """The user's saved theme; `auto` for an anonymous visitor or a user who never chose."""
    if user is None or not user.is_authenticated:
        return DEFAULT_THEME
    saved = UserPreference.objects.filter(user=user).values_list("theme", flat=True).first()
    return saved if saved in THEMES else DEFAULT_THEME


def theme(request) -> dict:
    return {"theme": SimpleLazyObject(lambda: theme_for(getattr(request, "user", None))),
            "theme_choices": THEME_CHOICES}
