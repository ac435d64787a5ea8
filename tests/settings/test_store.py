"""The settings store: fresh reads, validated writes, the audit trail, change callbacks, prices."""
from __future__ import annotations

import pytest

from compression import settings_store
from compression.core.config import ConfigValueError, RuntimeConfig
from compression.models import CompressionSettings, ModelPrice, SettingsChange

from .conftest import snapshot

pytestmark = pytest.mark.django_db


def test_it_starts_from_the_spec_defaults():
    assert settings_store.current() == RuntimeConfig()


def test_it_uses_defaults_when_a_row_is_missing():
    CompressionSettings.objects.all().delete()
    assert settings_store.current().compression.threshold == 0.50


def test_it_shows_a_saved_change_on_the_next_read(alice):
    assert settings_store.current().compression.threshold == 0.50
    settings_store.save_group("compression", {"threshold": 0.65}, user=alice)
    assert settings_store.current().compression.threshold == 0.65


def test_it_reads_the_database_on_every_call():
    settings_store.current()
    CompressionSettings.objects.filter(pk=1).update(target_ratio=0.33)  # a write by another process
    assert settings_store.current().compression.target_ratio == 0.33


def test_an_unchanged_row_is_read_again_and_gives_the_same_config(django_assert_num_queries):
    first = settings_store.current()
    with django_assert_num_queries(1):
        assert settings_store.current() is first  # read, but not converted and validated again
    CompressionSettings.objects.filter(pk=1).update(threshold=0.61)
    with django_assert_num_queries(1):
        changed = settings_store.current()
    assert changed is not first and changed.compression.threshold == 0.61
    CompressionSettings.objects.filter(pk=1).update(threshold=0.50)
    assert settings_store.current().compression.threshold == 0.50


def test_it_saves_nothing_when_any_value_is_invalid(alice):
    before = snapshot()
    with pytest.raises(ConfigValueError) as exc:
        settings_store.save_groups(
            {"agent": {"max_iterations": 50}, "compression": {"threshold": 1.5}}, user=alice)
    assert exc.value.key == "compression.threshold"
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_it_audits_each_changed_field_with_old_and_new(alice):
    settings_store.save_group("compression", {"threshold": 0.6, "in_place": True, "protect_last_n": 20},
                              user=alice)
    rows = {r.field: r for r in SettingsChange.objects.all()}
    assert set(rows) == {"threshold", "in_place"}  # protect_last_n did not change
    assert (rows["threshold"].old_value, rows["threshold"].new_value) == ("0.5", "0.6")
    assert (rows["in_place"].old_value, rows["in_place"].new_value) == ("false", "true")
    assert {r.username for r in rows.values()} == {"alice"} and rows["threshold"].user == alice
    assert {r.group for r in rows.values()} == {"compression"}
    assert {r.source for r in rows.values()} == {"admin"}


def test_it_masks_secrets_in_the_audit_trail(alice):
    settings_store.save_group("auxiliary", {"api_key": "sk-first-SECRET"}, user=alice)
    settings_store.save_group("auxiliary", {"api_key": "sk-second-SECRET"}, user=alice)
    settings_store.save_group("auxiliary", {"api_key": ""}, user=alice)
    rows = list(SettingsChange.objects.order_by("id").values_list("old_value", "new_value"))
    assert rows == [("", "•••"), ("•••", "•••"), ("•••", "")]
    assert settings_store.current().auxiliary.api_key == ""


def test_it_calls_change_callbacks_after_commit(alice, django_capture_on_commit_callbacks):
    seen = []
    settings_store.on_settings_changed(seen.append)
    with django_capture_on_commit_callbacks(execute=True):
        settings_store.save_group("compression", {"threshold": 0.7}, user=alice)
    assert len(seen) == 1
    event = seen[0]
    assert event.groups == ("compression",)
    assert event.changes == {"compression": {"threshold": ("0.5", "0.7")}}
    assert event.config.compression.threshold == 0.7
    assert event.user_id == alice.pk


def test_it_does_not_call_callbacks_for_no_change_or_a_refused_change(alice, django_capture_on_commit_callbacks):
    seen = []
    settings_store.on_settings_changed(seen.append)
    with django_capture_on_commit_callbacks(execute=True) as pending:
        settings_store.save_group("compression", {"threshold": 0.5}, user=alice)
        with pytest.raises(ConfigValueError):
            settings_store.save_group("compression", {"threshold": 0}, user=alice)
    assert seen == [] and pending == []


def test_it_keeps_calling_callbacks_after_one_fails(alice, django_capture_on_commit_callbacks):
    seen = []

    def broken(event):
        raise RuntimeError("listener bug")

    settings_store.on_settings_changed(broken)
    settings_store.on_settings_changed(seen.append)
    with django_capture_on_commit_callbacks(execute=True):
        settings_store.save_group("agent", {"max_iterations": 12}, user=alice)
    assert [e.config.agent.max_iterations for e in seen] == [12]
    assert settings_store.current().agent.max_iterations == 12


def test_it_masks_secrets_in_callback_events(alice, django_capture_on_commit_callbacks):
    seen = []
    settings_store.on_settings_changed(seen.append)
    with django_capture_on_commit_callbacks(execute=True):
        settings_store.save_group("auxiliary", {"api_key": "sk-SECRET"}, user=alice)
    assert seen[0].changes == {"auxiliary": {"api_key": ("", "•••")}}


def test_it_falls_back_to_the_default_for_a_corrupt_stored_value():
    CompressionSettings.objects.filter(pk=1).update(threshold=7.0, target_ratio=0.3)
    config = settings_store.current().compression
    assert (config.threshold, config.target_ratio) == (0.50, 0.3)


def test_it_seeds_prices_from_the_model_catalog():
    sonnet = {"input": 3.0, "output": 15.0, "cache_write_5m": 3.75, "cache_write_1h": 6.0, "cache_read": 0.3}
    assert settings_store.price_for("claude-sonnet-4-5") == sonnet
    assert settings_store.price_for("sim-claude-64k") == sonnet
    assert settings_store.price_for("sim-claude-200k") == sonnet
    assert settings_store.price_for("claude-haiku-4-5")["input"] == 1.0


def test_it_prices_a_dated_model_id_like_its_family():
    assert settings_store.price_for("claude-sonnet-4-5-20250929") == settings_store.price_for("claude-sonnet-4-5")


def test_it_has_no_price_for_an_unknown_model():
    assert settings_store.price_for("gpt-imaginary") is None


def test_it_reads_edited_prices_and_audits_them(alice):
    price = ModelPrice.objects.get(model="sim-claude-200k")
    price.input = 4
    settings_store.save_price(price, user=alice)
    assert settings_store.price_for("sim-claude-200k")["input"] == 4.0
    row = SettingsChange.objects.get(group="prices")
    assert (row.field, row.old_value, row.new_value) == ("sim-claude-200k.input", "3", "4")
