"""/healthz tells anyone whether the service is up, and only staff (or the metrics bearer token)
which part is down and which worker hosts are alive."""
from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

PARTS = {"database", "redis", "workers"}


def test_an_anonymous_caller_gets_the_status_alone(client):
    response = client.get(reverse("healthz"))
    assert response.status_code == 503  # the fast tier runs without Redis or a worker
    assert response.json() == {"status": "degraded"}


def test_a_signed_in_user_who_is_not_staff_gets_the_status_alone(client, alice):
    client.force_login(alice)
    assert client.get(reverse("healthz")).json() == {"status": "degraded"}


def test_staff_get_every_part(client, admin_user):
    client.force_login(admin_user)
    body = client.get(reverse("healthz")).json()
    assert PARTS <= set(body)
    assert body["database"]["ok"] is True and body["redis"]["ok"] is False
    assert body["workers"] == {"ok": False, "alive": []}


def test_the_metrics_bearer_token_gets_every_part_and_a_wrong_one_does_not(client, settings):
    settings.HERMES_METRICS_TOKEN = "s3cret-token-for-monitoring"
    good = client.get(reverse("healthz"), HTTP_AUTHORIZATION="Bearer s3cret-token-for-monitoring").json()
    assert PARTS <= set(good)
    bad = client.get(reverse("healthz"), HTTP_AUTHORIZATION="Bearer guess").json()
    assert bad == {"status": "degraded"}
