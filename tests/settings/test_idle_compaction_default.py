"""Cache-aware compaction timing is off by default from migration 0012: an installation still on
the old default (on) that no admin chose follows it; one whose admin chose keeps the choice and
the idle rule it ran (at_share)."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from compression import settings_store
from compression.models import CompressionSettings

BEFORE = ("compression", "0011_compaction_timing")
AFTER = ("compression", "0012_idle_compaction_rule")


def _at(target, *, idle: bool, chosen: bool) -> None:
    """Migrate to ``target`` and store ``idle`` there, recorded as an admin's choice or not."""
    executor = MigrationExecutor(connection)
    executor.migrate([target])
    apps = executor.loader.project_state([target]).apps
    apps.get_model("compression", "CompressionSettings").objects.update_or_create(
        pk=1, defaults={"idle_compaction": idle})
    change = apps.get_model("compression", "SettingsChange")
    change.objects.filter(group="compression", field="idle_compaction").delete()
    if chosen:
        change.objects.create(group="compression", field="idle_compaction", old_value="false", new_value="true")


@pytest.mark.django_db
def test_a_fresh_installation_has_the_timing_off():
    assert settings_store.current().compression.idle_compaction is False
    assert settings_store.current().compression.idle_compaction_when == "due_this_turn"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("chosen", "after", "rule"), [(False, False, "due_this_turn"), (True, True, "at_share")])
def test_the_old_default_follows_the_new_one_unless_an_admin_chose_it(chosen, after, rule):
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        _at(BEFORE, idle=True, chosen=chosen)
        MigrationExecutor(connection).migrate([AFTER])
        row = CompressionSettings.objects.get(pk=1)
        assert row.idle_compaction is after and row.idle_compaction_when == rule
        MigrationExecutor(connection).migrate([BEFORE])  # and back
        assert CompressionSettings.objects.using("default").raw(
            "SELECT id, idle_compaction FROM compression_compressionsettings")[0].idle_compaction is True
    finally:
        MigrationExecutor(connection).migrate(leaves)
