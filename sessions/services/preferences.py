"""What a user chose for the look of the app, kept with the account: the colour theme."""
from __future__ import annotations

from sessions.models import UserPreference

THEMES = frozenset(value for value, _ in UserPreference.THEMES)
DEFAULT_THEME = UserPreference._meta.get_field("theme").default


def user_theme(user) -> str:
    """The user's saved theme; the default (auto) for an anonymous visitor or one who never chose."""
    if user is None or not user.is_authenticated:
        return DEFAULT_THEME
    saved = UserPreference.objects.filter(user=user).values_list("theme", flat=True).first()
    return saved if saved in THEMES else DEFAULT_THEME


def user_theme_set(*, user, theme: str) -> UserPreference:
    """Keep ``theme`` for ``user``; ``ValueError`` for a theme that is not one of THEMES."""
    if theme not in THEMES:
        raise ValueError("Unknown theme: choose auto, light or dark.")
    preference, _ = UserPreference.objects.update_or_create(user=user, defaults={"theme": theme})
    return preference
