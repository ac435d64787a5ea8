"""The auxiliary API key at rest: the database column never holds it in clear, code reads it back,
the migration encrypts a key stored by earlier versions, and a rotated SECRET_KEY is survivable."""
from __future__ import annotations

import importlib
import logging

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from compression import settings_store
from compression.models import AuxiliarySettings
from compression.yaml_io import export_config

from .conftest import change_url, form_data

SECRET = "sk-aux-AT-REST-SECRET-7788"
MIGRATION = "0004_agent_terminal_sandbox_and_key_at_rest"


def raw_key() -> str:
    """The api_key column as the database holds it, read with plain SQL."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT api_key FROM {AuxiliarySettings._meta.db_table} WHERE id = 1")
        return cursor.fetchone()[0]


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.mark.django_db
def test_the_column_holds_the_key_encrypted_and_code_reads_it_in_clear():
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    stored = raw_key()
    assert SECRET not in stored
    assert stored.startswith("fernet:")
    assert settings_store.current().auxiliary.api_key == SECRET
    assert AuxiliarySettings.objects.get().api_key == SECRET


@pytest.mark.django_db
def test_a_key_typed_in_the_admin_is_stored_encrypted(staff_client):
    staff_client.post(change_url("auxiliary"), {**form_data("auxiliary"), "api_key": SECRET})
    assert SECRET not in raw_key()
    assert settings_store.current().auxiliary.api_key == SECRET


@pytest.mark.django_db
def test_no_key_stays_an_empty_column():
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    settings_store.save_group("auxiliary", {"api_key": ""})
    assert raw_key() == ""


@pytest.mark.django_db
def test_the_export_holds_neither_the_key_nor_its_ciphertext():
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    exported = export_config()
    assert SECRET not in exported
    assert "fernet:" not in exported and "api_key" not in exported


@pytest.mark.django_db
def test_a_fallback_secret_key_still_opens_the_stored_key(settings):
    settings.SECRET_KEY = "old-secret-key-" + "x" * 40
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    settings.SECRET_KEY = "new-secret-key-" + "y" * 40
    settings.SECRET_KEY_FALLBACKS = ["old-secret-key-" + "x" * 40]
    assert settings_store.current().auxiliary.api_key == SECRET


@pytest.mark.django_db
def test_a_key_no_secret_key_opens_reads_as_empty_and_is_logged(settings, caplog):
    settings.SECRET_KEY = "old-secret-key-" + "x" * 40
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    settings.SECRET_KEY = "new-secret-key-" + "y" * 40
    settings.SECRET_KEY_FALLBACKS = []
    with caplog.at_level(logging.ERROR, logger="compression.models"):
        assert settings_store.current().auxiliary.api_key == ""
    assert "cannot be decrypted" in caplog.text
    assert raw_key().startswith("fernet:")  # kept: restoring the old SECRET_KEY opens it again


@pytest.mark.django_db(transaction=True)
def test_the_migration_encrypts_a_key_stored_in_clear_and_reverses():
    previous = importlib.import_module(f"compression.migrations.{MIGRATION}").Migration.dependencies[0]
    executor = MigrationExecutor(connection)
    leaves = executor.loader.graph.leaf_nodes()
    try:
        executor.migrate([previous])
        old_model = executor.loader.project_state([previous]).apps.get_model("compression", "AuxiliarySettings")
        old_model.objects.update_or_create(pk=1, defaults={"api_key": SECRET})
        assert raw_key() == SECRET  # the situation the issue reports

        executor = MigrationExecutor(connection)
        executor.migrate([("compression", MIGRATION)])
        assert SECRET not in raw_key()
        assert AuxiliarySettings.objects.get().api_key == SECRET

        executor = MigrationExecutor(connection)
        executor.migrate([previous])
        assert raw_key() == SECRET
    finally:
        MigrationExecutor(connection).migrate(leaves)
    assert AuxiliarySettings.objects.get().api_key == SECRET
