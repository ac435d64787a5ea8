"""The settings admin: validated forms, singletons, the write-only API key, the read-only audit trail,
and who may see any of it."""
from __future__ import annotations

import pytest
from django.urls import reverse

from compression import settings_store
from compression.models import SETTINGS_MODELS, AuxiliarySettings, ModelPrice, SettingsChange

from .conftest import change_url, form_data, snapshot

pytestmark = pytest.mark.django_db

SECRET = "sk-ant-TOPSECRET-4242"

# (group, field, posted value, text the field error must contain)
INVALID = [
    ("compression", "threshold", "0", "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", "1.5", "0.0–1.0 (exclusive of 0)"),
    ("compression", "threshold", "abc", "0.0–1.0 (exclusive of 0)"),
    ("compression", "target_ratio", "0.05", "0.10–0.80"),
    ("compression", "target_ratio", "0.9", "0.10–0.80"),
    ("compression", "protect_last_n", "0", "≥ 1"),
    ("compression", "protect_first_n", "-1", "≥ 0"),
    ("compression", "hygiene_hard_message_limit", "3", "≥ 4"),
    ("compression", "max_compression_attempts", "0", "1–10"),
    ("compression", "max_compression_attempts", "11", "1–10"),
    ("compression", "on_summary_failure", "drop", "abort / fallback"),
    ("compression", "codex_app_server_auto", "auto", "native / hermes / off"),
    ("auxiliary", "provider", "openai", "auto, main, anthropic, openrouter, nous, custom, simulator"),
    ("auxiliary", "base_url", "not a url", "empty or an http(s) URL"),
    ("auxiliary", "base_url", "ftp://files.example.com", "empty or an http(s) URL"),
    ("auxiliary", "timeout", "4", "5–900"),
    ("auxiliary", "timeout", "901", "5–900"),
    ("caching", "cache_ttl", "10m", "5m / 1h"),
    ("caching", "strategy", "every_message", "none, rolling_1h"),
    ("context", "engine", "two words", "a registered or plugin engine name"),
    ("model", "provider", "openai", "simulator, anthropic"),
    ("model", "model", "", "a model name"),
    ("model", "context_length", "32000", "empty or ≥ 64,000"),
    ("model", "max_tokens", "0", "≥ 1"),
    ("agent", "max_iterations", "0", "1–200"),
    ("agent", "max_iterations", "201", "1–200"),
    ("agent", "terminal_timeout", "0", "1–600"),
    ("agent", "terminal_timeout", "601", "1–600"),
]

# group → posted values that are all valid (edges of each range), and what current() must then hold.
VALID = {
    "compression": ({"threshold": "1.0", "target_ratio": "0.80", "protect_last_n": "1", "protect_first_n": "0",
                     "hygiene_hard_message_limit": "4", "max_compression_attempts": "10", "in_place": True,
                     "enabled": False, "on_summary_failure": "fallback", "codex_gpt55_autoraise": False,
                     "codex_app_server_auto": "off"},
                    {"threshold": 1.0, "target_ratio": 0.80, "protect_last_n": 1, "protect_first_n": 0,
                     "hygiene_hard_message_limit": 4, "max_compression_attempts": 10, "in_place": True,
                     "enabled": False, "on_summary_failure": "fallback", "codex_gpt55_autoraise": False,
                     "codex_app_server_auto": "off"}),
    "auxiliary": ({"provider": "custom", "model": "small-summariser", "base_url": "http://127.0.0.1:9000/v1",
                   "timeout": "900"},
                  {"provider": "custom", "model": "small-summariser", "base_url": "http://127.0.0.1:9000/v1",
                   "timeout": 900}),
    "caching": ({"cache_ttl": "1h", "strategy": "none"}, {"cache_ttl": "1h", "strategy": "none"}),
    "context": ({"engine": "lcm"}, {"engine": "lcm"}),
    "model": ({"provider": "anthropic", "model": "claude-sonnet-4-5", "context_length": "64000", "max_tokens": "1"},
              {"provider": "anthropic", "model": "claude-sonnet-4-5", "context_length": 64000, "max_tokens": 1}),
    "agent": ({"max_iterations": "200", "terminal_enabled": True, "terminal_timeout": "600"},
              {"max_iterations": 200, "terminal_enabled": True, "terminal_timeout": 600}),
}


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize("group, name, posted, valid", INVALID, ids=[f"{g}.{n}={v}" for g, n, v, _ in INVALID])
def test_it_rejects_an_invalid_value_in_the_admin_form_and_saves_nothing(staff_client, group, name, posted, valid):
    before = snapshot()
    response = staff_client.post(change_url(group), form_data(group, **{name: posted}))
    assert response.status_code == 200  # the form comes back with its errors
    errors = response.context["adminform"].form.errors
    assert list(errors) == [name]
    assert valid in errors[name][0]
    assert valid in response.content.decode()
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


@pytest.mark.parametrize("group", list(VALID))
def test_it_saves_valid_values_from_the_admin_form(staff_client, admin_user, group):
    posted, expected = VALID[group]
    response = staff_client.post(change_url(group), form_data(group, **posted))
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    stored = getattr(settings_store.current(), group)
    assert {k: getattr(stored, k) for k in expected} == expected
    changed = set(SettingsChange.objects.filter(group=group).values_list("field", flat=True))
    assert changed and changed <= set(expected)
    assert set(SettingsChange.objects.values_list("username", flat=True)) == {admin_user.username}


def test_it_clears_the_context_length_override_with_an_empty_field(staff_client):
    settings_store.save_group("model", {"context_length": 128_000})
    staff_client.post(change_url("model"), form_data("model", context_length=""))
    assert settings_store.current().model.context_length is None


def test_it_records_old_and_new_values_of_an_admin_change(staff_client):
    staff_client.post(change_url("compression"), form_data("compression", threshold="0.6"))
    row = SettingsChange.objects.get()
    assert (row.group, row.field, row.old_value, row.new_value, row.source) == (
        "compression", "threshold", "0.5", "0.6", "admin")


def test_it_shows_the_valid_range_as_help_text(staff_client):
    page = staff_client.get(change_url("compression")).content.decode()
    assert "Valid: 0.0–1.0 (exclusive of 0)." in page and "Valid: 0.10–0.80." in page
    page = staff_client.get(change_url("caching")).content.decode()
    assert "Valid: 5m / 1h." in page


def test_it_opens_the_single_row_from_the_list_page(staff_client):
    for group, model in SETTINGS_MODELS.items():
        response = staff_client.get(reverse(f"admin:compression_{model._meta.model_name}_changelist"))
        assert response.status_code == 302 and response["Location"] == change_url(group)


def test_it_cannot_add_or_delete_a_settings_singleton(staff_client):
    for model in SETTINGS_MODELS.values():
        name = model._meta.model_name
        assert staff_client.get(reverse(f"admin:compression_{name}_add")).status_code == 403
        delete = staff_client.post(reverse(f"admin:compression_{name}_delete", args=[1]), {"post": "yes"})
        assert delete.status_code == 403
        assert model.objects.filter(pk=1).exists()


# --- The write-only API key -------------------------------------------------------------------


def test_it_stores_a_new_api_key_without_ever_rendering_it(staff_client):
    staff_client.post(change_url("auxiliary"), {**form_data("auxiliary"), "api_key": SECRET})
    assert settings_store.current().auxiliary.api_key == SECRET
    page = staff_client.get(change_url("auxiliary")).content.decode()
    assert SECRET not in page
    assert "A key is stored" in page
    row = SettingsChange.objects.get(field="api_key")
    assert (row.old_value, row.new_value) == ("", "•••")


def test_it_keeps_the_stored_key_when_the_field_is_left_blank(staff_client):
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    staff_client.post(change_url("auxiliary"), form_data("auxiliary", timeout="60"))
    aux = settings_store.current().auxiliary
    assert (aux.api_key, aux.timeout) == (SECRET, 60)
    assert SettingsChange.objects.filter(field="api_key").count() == 1  # only the setup's own change


def test_it_removes_the_key_with_the_clear_box(staff_client):
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    staff_client.post(change_url("auxiliary"), {**form_data("auxiliary"), "clear_api_key": "on"})
    assert settings_store.current().auxiliary.api_key == ""
    row = SettingsChange.objects.filter(field="api_key").first()  # the newest
    assert (row.old_value, row.new_value) == ("•••", "")


def test_it_refuses_a_new_key_and_the_clear_box_together(staff_client):
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    response = staff_client.post(change_url("auxiliary"),
                                 {**form_data("auxiliary"), "api_key": "sk-other", "clear_api_key": "on"})
    assert response.status_code == 200
    assert settings_store.current().auxiliary.api_key == SECRET


def test_it_never_renders_the_api_key_in_any_admin_page(staff_client):
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    typed = "sk-typed-NEWSECRET-77"
    # A form error re-renders the page: neither the stored key nor the one just typed comes back.
    invalid = staff_client.post(change_url("auxiliary"), {**form_data("auxiliary", timeout="1"), "api_key": typed})
    assert invalid.status_code == 200
    pages = [invalid.content.decode()]
    settings_store.save_group("auxiliary", {"api_key": SECRET + "-v2"})
    audit = SettingsChange.objects.filter(field="api_key").first()
    urls = [
        reverse("admin:index"),
        reverse("admin:app_list", args=["compression"]),
        change_url("auxiliary"),
        reverse("admin:compression_auxiliarysettings_history", args=[1]),
        reverse("admin:compression_settingschange_changelist"),
        reverse("admin:compression_settingschange_change", args=[audit.pk]),
        reverse("admin:compression_config_export"),
        reverse("admin:compression_config_import"),
        *[change_url(g) for g in SETTINGS_MODELS],
    ]
    rendered = {}
    for url in urls:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        rendered[url] = response.content.decode()
    for page in [*pages, *rendered.values()]:
        assert SECRET not in page and typed not in page
    assert "•••" in rendered[reverse("admin:compression_settingschange_changelist")]  # masked, but listed
    assert AuxiliarySettings.objects.get().api_key == SECRET + "-v2"


# --- The audit trail and prices ---------------------------------------------------------------


def test_it_shows_the_audit_trail_read_only_to_any_staff_member(client, carol):
    settings_store.save_group("compression", {"threshold": 0.55})
    row = SettingsChange.objects.get()
    client.force_login(carol)
    listing = client.get(reverse("admin:compression_settingschange_changelist"))
    assert listing.status_code == 200 and "0.55" in listing.content.decode()
    detail = client.get(reverse("admin:compression_settingschange_change", args=[row.pk]))
    assert detail.status_code == 200
    assert 'name="new_value"' not in detail.content.decode()  # read-only: no inputs
    client.post(reverse("admin:compression_settingschange_change", args=[row.pk]), {"new_value": "0.99"})
    assert client.get(reverse("admin:compression_settingschange_add")).status_code == 403
    assert client.post(reverse("admin:compression_settingschange_delete", args=[row.pk]),
                       {"post": "yes"}).status_code == 403
    row.refresh_from_db()
    assert row.new_value == "0.55"


def test_it_keeps_settings_pages_from_staff_without_permissions(client, carol):
    client.force_login(carol)
    assert client.get(change_url("compression")).status_code == 403
    assert client.get(reverse("admin:compression_config_export")).status_code == 403
    before = snapshot()
    response = client.post(reverse("admin:compression_config_import"), {"text": "compression:\n  threshold: 0.9\n"})
    assert response.status_code == 403
    assert snapshot() == before


def test_it_audits_price_edits_from_the_admin(staff_client):
    price = ModelPrice.objects.get(model="claude-haiku-4-5")
    url = reverse("admin:compression_modelprice_change", args=[price.pk])
    staff_client.post(url, {"model": price.model, "input": "1.5", "output": "5", "cache_write_5m": "1.25",
                            "cache_write_1h": "2", "cache_read": "0.1"})
    assert settings_store.price_for("claude-haiku-4-5")["input"] == 1.5
    row = SettingsChange.objects.get(group="prices")
    assert (row.field, row.old_value, row.new_value) == ("claude-haiku-4-5.input", "1", "1.5")


def test_it_refuses_a_negative_price(staff_client):
    price = ModelPrice.objects.get(model="claude-haiku-4-5")
    url = reverse("admin:compression_modelprice_change", args=[price.pk])
    response = staff_client.post(url, {"model": price.model, "input": "-1", "output": "5", "cache_write_5m": "1.25",
                                       "cache_write_1h": "2", "cache_read": "0.1"})
    assert response.status_code == 200
    assert settings_store.price_for("claude-haiku-4-5")["input"] == 1.0


# --- Who gets in ------------------------------------------------------------------------------


def _admin_urls():
    return [*[change_url(g) for g in SETTINGS_MODELS], reverse("admin:compression_settingschange_changelist"),
            reverse("admin:compression_modelprice_changelist"), reverse("admin:compression_config_export"),
            reverse("admin:compression_config_import")]


def test_it_sends_a_non_staff_user_to_the_admin_login(client, alice):
    client.force_login(alice)
    for url in _admin_urls():
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url


def test_it_refuses_import_and_export_to_a_non_staff_user(client, alice):
    client.force_login(alice)
    before = snapshot()
    response = client.post(reverse("admin:compression_config_import"), {"text": "compression:\n  threshold: 0.9\n"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("admin:login"))
    assert snapshot() == before
    export = client.get(reverse("admin:compression_config_export"))
    assert export.status_code == 302 and b"compression" not in export.content


def test_it_sends_an_anonymous_visitor_to_a_login_page(client):
    for url in _admin_urls():
        response = client.get(url)
        assert response.status_code == 302, url
        assert "login" in response["Location"], url
