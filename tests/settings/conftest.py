from __future__ import annotations

import pytest
from django.urls import reverse

from compression import settings_store
from compression.core.config import GROUPS, config_values
from compression.models import SETTINGS_MODELS


@pytest.fixture(autouse=True)
def _isolated(settings, monkeypatch):
    """No services, fast password hashing, and only the callbacks a test registers itself."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    monkeypatch.setattr(settings_store, "_callbacks", [])


@pytest.fixture
def carol(django_user_model):
    """Staff, but with no model permissions."""
    return django_user_model.objects.create_user("carol", password="carol-password-1", is_staff=True)


def change_url(group: str) -> str:
    return reverse(f"admin:compression_{SETTINGS_MODELS[group]._meta.model_name}_change", args=[1])


def form_data(group: str, **overrides) -> dict:
    """What the admin form posts for the stored values of `group`, with `overrides` applied.

    Booleans follow HTML: a ticked checkbox posts "on", an unticked one posts nothing.
    """
    values = config_values(getattr(settings_store.current(), group))
    values.pop("api_key", None)
    values.update(overrides)
    data = {}
    for name, value in values.items():
        if value is True:
            data[name] = "on"
        elif value is False:
            continue
        elif value is None:
            data[name] = ""
        else:
            data[name] = str(value)
    return data


def snapshot():
    """Everything the settings store holds, for "nothing changed" checks."""
    config = settings_store.current()
    return {g: config_values(getattr(config, g)) for g in GROUPS}
