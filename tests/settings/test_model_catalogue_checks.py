"""Model settings checked against the catalogue in the admin forms: a setting that would make every
new conversation fail is refused with an error naming the setting, and nothing is saved."""
from __future__ import annotations

import pytest

from compression import settings_store
from compression.models import SettingsChange

from .conftest import change_url, form_data, snapshot

pytestmark = pytest.mark.django_db

# (group, posted values, the field the error is on, text the error must contain)
REFUSED = [
    ("model", {"model": "sim-claude-32k"}, "model", "model.context_length: sim-claude-32k has a 32,000-token window"),
    ("model", {"model": "sim-claude-2000k"}, "model", "model.model: 'sim-claude-2000k' is not in the model catalogue"),
    ("model", {"provider": "custom", "model": "llama-3.3-70b", "context_length": "131072"}, "base_url",
     "model.base_url: the custom provider needs the endpoint's base URL"),
    ("model", {"model": "llama-3.3-70b", "context_length": "32000"}, "context_length", "empty or ≥ 64,000"),
    ("auxiliary", {"provider": "simulator", "model": "sim-claude-32k"}, "model",
     "auxiliary.compression.model: sim-claude-32k has a 32,000-token window"),
]


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("group, posted, field, text", REFUSED, ids=[str(p) for _, p, _, _ in REFUSED])
def test_it_refuses_a_model_setting_the_catalogue_rules_out(staff_client, group, posted, field, text):
    before = snapshot()
    response = staff_client.post(change_url(group), form_data(group, **posted))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert text in errors[field][0]
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_an_unknown_model_with_its_window_is_accepted(staff_client):
    posted = {"provider": "custom", "model": "llama-3.3-70b", "context_length": "131072",
              "base_url": "http://127.0.0.1:8000/v1", "api_key": "sk-local-secret"}
    response = staff_client.post(change_url("model"), form_data("model", **posted))
    assert response.status_code == 302
    stored = settings_store.current().model
    assert (stored.provider, stored.model, stored.context_length, stored.base_url) == (
        "custom", "llama-3.3-70b", 131_072, "http://127.0.0.1:8000/v1")
    assert stored.api_key == "sk-local-secret"
    page = staff_client.get(change_url("model")).content.decode()
    assert "sk-local-secret" not in page and "A key is stored" in page


def test_the_custom_endpoints_key_is_encrypted_at_rest(staff_client):
    from django.db import connection

    from compression.models import ModelDefaults

    posted = {"provider": "custom", "model": "llama-3.3-70b", "context_length": "131072",
              "base_url": "http://127.0.0.1:8000/v1", "api_key": "sk-local-secret"}
    assert staff_client.post(change_url("model"), form_data("model", **posted)).status_code == 302
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT api_key FROM {ModelDefaults._meta.db_table}")
        (raw,) = cursor.fetchone()
    assert raw and "sk-local-secret" not in raw
    assert settings_store.current().model.api_key == "sk-local-secret"
