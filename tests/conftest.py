from __future__ import annotations

import functools

import pytest
from django.contrib.auth.hashers import make_password

# Django's advice for test suites that create and log in many users: a fast hasher. The product's
# own (PBKDF2, ~0.25 s a password here by design) stays in force wherever another process checks
# the password: the integration tier's Daphne logs its users in with it.
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fast_password_hashing(request):
    if request.node.get_closest_marker("integration") is None:
        request.getfixturevalue("settings").PASSWORD_HASHERS = FAST_HASHERS


@functools.cache
def _hashed(password: str, hashers: tuple[str, ...]) -> str:
    """One hash per password and hasher list a process: a real one, with its own salt, that every
    later user with that password shares (the integration tier's PBKDF2 is hashed once, not per test)."""
    return make_password(password)


def user(django_user_model, name: str, password: str, **fields):
    from django.conf import settings

    u = django_user_model.objects.create_user(name, **fields)
    u.password = _hashed(password, tuple(settings.PASSWORD_HASHERS))
    u.save(update_fields=["password"])
    return u


@pytest.fixture
def alice(django_user_model):
    return user(django_user_model, "alice", "alice-password-1")


@pytest.fixture
def bob(django_user_model):
    return user(django_user_model, "bob", "bob-password-1")
