"""Login throttling (django-axes): after HERMES_LOGIN_FAILURES failures for one username from one
address, that pair is refused for HERMES_LOGIN_COOLOFF_MINUTES, on the site's login and the
admin's; the page says until when; staff can unlock.

The clock axes stamps each attempt with is injected (`clock`), so the cool-off is passed without
waiting. Every attempt lives in the test's database transaction: nothing here locks out another test.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from asgiref.sync import async_to_sync
from axes.models import AccessAttempt
from django.test import AsyncClient
from django.urls import reverse

from tests.conftest import user

pytestmark = pytest.mark.django_db

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HERE = "10.0.0.1"
ELSEWHERE = "10.0.0.2"
LOCKED = b"Too many failed attempts"


class Clock:
    """The time axes reads for each attempt; `advance` moves it on."""

    def __init__(self, now: datetime):
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock():
    c = Clock(START)
    with mock.patch("axes.handlers.proxy.now", c):
        yield c


@pytest.fixture
def root(django_user_model):
    return user(django_user_model, "root", "root-password-1", is_staff=True, is_superuser=True)


def attempt(client, username: str, password: str, address: str = HERE, url: str | None = None):
    return client.post(url or reverse("login"), {"username": username, "password": password},
                       REMOTE_ADDR=address)


def fail(client, username: str, times: int, **kwargs):
    return [attempt(client, username, "not-the-password", **kwargs) for _ in range(times)]


def logged_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_the_sixth_attempt_after_five_failures_is_refused_with_the_page_saying_until_when(client, alice, clock):
    first_four = fail(client, "alice", 4)
    assert [r.status_code for r in first_four] == [200] * 4
    assert all(b"didn't match" in r.content and LOCKED not in r.content for r in first_four)
    fifth = attempt(client, "alice", "not-the-password")
    clock.advance(minutes=5)
    sixth = attempt(client, "alice", "not-the-password")
    for response in (fifth, sixth):
        assert response.status_code == 429
        page = response.content.decode()
        assert "Too many failed attempts for the username “alice” from this address." in page
        assert 'role="alert"' in page and 'name="username"' in page and "topbar" in page  # the normal page
        assert "Traceback" not in page and "didn't match" not in page
    assert "Try again in 15 minutes, at 09:15 UTC." in fifth.content.decode()
    # Refused attempts during the lock do not move its end.
    assert "Try again in 10 minutes, at 09:15 UTC." in sixth.content.decode()


def test_another_address_or_another_username_is_not_refused(client, alice, bob, clock):
    fail(client, "alice", 5)
    response = attempt(client, "alice", "alice-password-1", address=ELSEWHERE)
    assert response.status_code == 302 and logged_in(client)
    client.logout()
    response = attempt(client, "bob", "bob-password-1")
    assert response.status_code == 302 and logged_in(client)


def test_the_right_password_during_the_lock_is_refused_and_works_after_the_cool_off(client, alice, clock):
    fail(client, "alice", 5)
    clock.advance(minutes=14, seconds=59)
    response = attempt(client, "alice", "alice-password-1")
    assert response.status_code == 429 and LOCKED in response.content and not logged_in(client)
    clock.advance(seconds=2)
    response = attempt(client, "alice", "alice-password-1")
    assert response.status_code == 302 and response["Location"] == reverse("home") and logged_in(client)


def test_a_success_resets_the_count(client, alice, clock):
    fail(client, "alice", 4)
    assert attempt(client, "alice", "alice-password-1").status_code == 302
    client.logout()
    assert [r.status_code for r in fail(client, "alice", 4)] == [200] * 4
    assert attempt(client, "alice", "not-the-password").status_code == 429


def test_the_admin_login_is_throttled_the_same_way(client, root, clock):
    admin_login = reverse("admin:login")
    responses = fail(client, "root", 5, url=admin_login)
    assert [r.status_code for r in responses] == [200] * 4 + [429]
    assert "Too many failed attempts for the username “root” from this address." in responses[-1].content.decode()
    response = attempt(client, "root", "root-password-1", url=admin_login)
    assert response.status_code == 429 and not logged_in(client)
    # One count for both doors: the site's login refuses the same pair.
    assert attempt(client, "root", "root-password-1").status_code == 429


def test_staff_unlock_a_pair_in_the_admin_and_it_logs_in_at_once(client, alice, root, clock):
    fail(client, "alice", 5)
    assert attempt(client, "alice", "alice-password-1").status_code == 429
    staff = client.__class__()
    staff.force_login(root)
    changelist = reverse("admin:axes_accessattempt_changelist")
    listing = staff.get(changelist)
    assert listing.status_code == 200
    page = listing.content.decode()
    assert "Locked until" in page and "alice" in page and HERE in page
    ids = list(AccessAttempt.objects.filter(username="alice").values_list("pk", flat=True))
    response = staff.post(changelist, {"action": "unlock", "_selected_action": ids}, follow=True)
    assert response.status_code == 200 and "Unlocked 1 username and address pair(s)." in response.content.decode()
    assert not AccessAttempt.objects.filter(username="alice").exists()
    response = attempt(client, "alice", "alice-password-1")
    assert response.status_code == 302 and logged_in(client)


def test_a_user_without_admin_rights_cannot_see_or_unlock(client, alice, bob, clock):
    fail(client, "alice", 5)
    other = client.__class__()
    other.force_login(bob)
    changelist = reverse("admin:axes_accessattempt_changelist")
    assert other.get(changelist).status_code == 302  # to the admin's login
    ids = list(AccessAttempt.objects.values_list("pk", flat=True))
    other.post(changelist, {"action": "unlock", "_selected_action": ids})
    assert AccessAttempt.objects.filter(username="alice").exists()


def test_the_numbers_come_from_the_settings(client, alice, clock, settings):
    settings.HERMES_LOGIN_FAILURES = 2
    settings.HERMES_LOGIN_COOLOFF_MINUTES = 1
    assert [r.status_code for r in fail(client, "alice", 2)] == [200, 429]
    response = attempt(client, "alice", "alice-password-1")
    assert response.status_code == 429
    assert "Try again in 1 minute, at 09:01 UTC." in response.content.decode()
    clock.advance(minutes=1, seconds=1)
    assert attempt(client, "alice", "alice-password-1").status_code == 302


def test_the_lockout_page_escapes_the_username_and_no_password_is_kept(client, clock):
    name = '<script>alert("x")</script>'
    response = fail(client, name, 5)[-1]
    page = response.content.decode()
    assert response.status_code == 429
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert all("not-the-password" not in a.post_data for a in AccessAttempt.objects.all())


def test_under_asgi_the_lockout_page_is_the_same(alice, clock):
    """Daphne's path: axes' middleware runs asynchronously and hands the page its arguments in
    another order."""

    async def five_failures():
        client = AsyncClient()
        return [await client.post(reverse("login"), {"username": "alice", "password": "not-the-password"})
                for _ in range(5)]

    responses = async_to_sync(five_failures)()  # the view's database work on this thread's connection
    assert [r.status_code for r in responses] == [200] * 4 + [429]
    page = responses[-1].content.decode()
    assert "Too many failed attempts for the username “alice” from this address." in page
    assert "Try again in 15 minutes, at 09:15 UTC." in page
