"""config.yaml import and export: round trip, all-or-nothing, line numbers, unknown keys, secrets."""
from __future__ import annotations

import io
import textwrap

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from compression import settings_store
from compression.core.config import RuntimeConfig, config_values
from compression.models import SettingsChange
from compression.yaml_io import ConfigImportError, config_to_dict, export_config, import_config, parse_config_yaml

from .conftest import snapshot

pytestmark = pytest.mark.django_db

SECRET = "sk-or-TOPSECRET-9001"
EVERYTHING_CHANGED = {
    "compression": {"enabled": False, "threshold": 0.65, "target_ratio": 0.35, "protect_last_n": 12,
                    "protect_first_n": 0, "hygiene_hard_message_limit": 400, "max_compression_attempts": 5,
                    "in_place": True, "on_summary_failure": "fallback", "codex_gpt55_autoraise": False,
                    "codex_gpt55_autoraise_notice": False, "codex_app_server_auto": "hermes"},
    "auxiliary": {"provider": "custom", "model": "summariser-small", "base_url": "https://llm.example.com/v1",
                  "timeout": 300, "api_key": SECRET},
    "caching": {"cache_ttl": "1h", "strategy": "none"},
    "context": {"engine": "lcm", "recall_tools": False},
    "model": {"provider": "anthropic", "model": "claude-sonnet-4-5", "context_length": 180_000, "max_tokens": 8192},
    "agent": {"max_iterations": 80, "terminal_enabled": True, "terminal_timeout": 120},
}


def _yaml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_it_round_trips_every_setting():
    settings_store.save_groups(EVERYTHING_CHANGED)
    changed = settings_store.current()
    exported = export_config()
    defaults = {g: config_values(getattr(RuntimeConfig(), g)) for g in EVERYTHING_CHANGED}
    defaults["auxiliary"]["api_key"] = SECRET  # an import never touches the key
    settings_store.save_groups(defaults)
    assert settings_store.current() != changed
    result = import_config(exported)
    assert settings_store.current() == changed
    assert result.warnings == []
    assert export_config() == exported


def test_it_exports_the_hermes_layout():
    settings_store.save_groups(EVERYTHING_CHANGED)
    data = yaml.safe_load(export_config())
    assert data["compression"]["threshold"] == 0.65
    assert data["auxiliary"]["compression"]["base_url"] == "https://llm.example.com/v1"
    assert data["prompt_caching"] == {"cache_ttl": "1h", "strategy": "none"}
    assert data["context"] == {"engine": "lcm", "recall_tools": False}
    assert data["model"]["context_length"] == 180_000
    assert data["agent"]["terminal_enabled"] is True


def test_it_never_exports_secrets():
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    text = export_config()
    assert SECRET not in text and "api_key" not in text
    assert "api_key" not in config_to_dict(settings_store.current())["auxiliary"]["compression"]


def test_it_keeps_the_stored_key_through_an_export_and_import():
    settings_store.save_group("auxiliary", {"api_key": SECRET})
    import_config(export_config())
    assert settings_store.current().auxiliary.api_key == SECRET


def test_it_imports_an_api_key_and_masks_it_in_the_audit():
    result = import_config(_yaml("""
        auxiliary:
          compression:
            api_key: sk-imported-SECRET
    """))
    assert settings_store.current().auxiliary.api_key == "sk-imported-SECRET"
    assert result.changes == {"auxiliary": {"api_key": ("", "•••")}}
    assert "SECRET" not in "".join(SettingsChange.objects.values_list("new_value", flat=True))


def test_it_changes_only_the_keys_in_the_file(alice):
    settings_store.save_group("agent", {"max_iterations": 44})
    result = import_config("compression:\n  threshold: 0.7\n", user=alice)
    config = settings_store.current()
    assert (config.compression.threshold, config.agent.max_iterations) == (0.7, 44)
    assert result.changes == {"compression": {"threshold": ("0.5", "0.7")}}
    row = SettingsChange.objects.get(source="import")
    assert (row.field, row.username) == ("threshold", "alice")


def test_it_changes_nothing_on_a_syntax_error_and_names_the_line():
    before = snapshot()
    text = _yaml("""
        agent:
          max_iterations: 10
        compression:
          threshold: 0.6
           target_ratio: 0.3
    """)
    with pytest.raises(ConfigImportError) as exc:
        import_config(text)
    assert exc.value.line == 5
    assert "line 5" in str(exc.value) and "YAML syntax error" in str(exc.value)
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_it_changes_nothing_on_an_invalid_value_and_names_its_line():
    before = snapshot()
    text = _yaml("""
        agent:
          max_iterations: 10
        compression:
          enabled: true
          threshold: 1.5
        prompt_caching:
          cache_ttl: 10m
    """)
    with pytest.raises(ConfigImportError) as exc:
        import_config(text)
    assert exc.value.errors == [
        (5, "compression.threshold must be a number 0.0–1.0 (exclusive of 0); got 1.5"),
        (7, "prompt_caching.cache_ttl must be one of 5m / 1h; got '10m'"),
    ]
    assert snapshot() == before
    assert not SettingsChange.objects.exists()


def test_it_refuses_a_key_given_twice():
    with pytest.raises(ConfigImportError) as exc:
        import_config("compression:\n  threshold: 0.6\n  threshold: 0.7\n")
    assert exc.value.errors == [(3, "compression.threshold is given twice (first on line 2)")]


def test_it_refuses_a_section_that_is_not_a_mapping():
    with pytest.raises(ConfigImportError) as exc:
        import_config("agent:\n  max_iterations: 10\ncompression: 0.5\n")
    assert exc.value.errors == [(3, "compression must be a mapping of settings")]
    assert settings_store.current().agent.max_iterations == 30


def test_it_reports_unknown_keys_with_their_lines_and_imports_the_rest():
    result = import_config(_yaml("""
        compression:
          threshold: 0.6
          summary_model: gpt-4o-mini
        auxiliary:
          compression:
            timeout: 60
          vision:
            model: gpt-4o
        toolsets: [files]
    """))
    assert result.warnings == [
        "line 3: unknown key compression.summary_model (ignored)",
        "line 7: unknown key auxiliary.vision (ignored)",
        "line 9: unknown section toolsets (ignored)",
    ]
    config = settings_store.current()
    assert (config.compression.threshold, config.auxiliary.timeout) == (0.6, 60)


@pytest.mark.parametrize("value, threshold, warned", [("0.8", 0.8, False), ("80", 0.8, True), ("1", 1.0, False),
                                                      ("65.5", 0.655, True)])
def test_it_accepts_threshold_percent_as_a_fraction_or_a_percentage(value, threshold, warned):
    result = import_config(f"compression:\n  threshold_percent: {value}\n")
    assert settings_store.current().compression.threshold == threshold
    assert any("read as a percentage" in w for w in result.warnings) is warned


def test_it_refuses_an_out_of_range_threshold_percent_on_its_line():
    with pytest.raises(ConfigImportError) as exc:
        import_config("agent:\n  max_iterations: 9\ncompression:\n  threshold_percent: 150\n")
    assert exc.value.line == 4 and "0.0–1.0 (exclusive of 0)" in str(exc.value)
    assert settings_store.current().agent.max_iterations == 30


def test_it_refuses_threshold_and_threshold_percent_that_disagree():
    with pytest.raises(ConfigImportError) as exc:
        import_config("compression:\n  threshold: 0.5\n  threshold_percent: 0.8\n")
    assert exc.value.errors == [(3, "compression.threshold_percent conflicts with the value on line 2")]


def test_it_understands_older_hermes_keys():
    import_config(_yaml("""
        model:
          default: claude-haiku-4-5
        compression:
          abort_on_summary_failure: false
    """))
    config = settings_store.current()
    assert (config.model.model, config.compression.on_summary_failure) == ("claude-haiku-4-5", "fallback")
    import_config("model: claude-sonnet-4-5\ncompression:\n  abort_on_summary_failure: true\n")
    config = settings_store.current()
    assert (config.model.model, config.compression.on_summary_failure) == ("claude-sonnet-4-5", "abort")


def test_it_reads_an_unquoted_off_as_the_word_off():
    import_config("compression:\n  codex_app_server_auto: off\n")
    assert settings_store.current().compression.codex_app_server_auto == "off"
    assert yaml.safe_load(export_config())["compression"]["codex_app_server_auto"] == "off"


def test_it_treats_an_empty_file_as_nothing_to_import():
    before = snapshot()
    result = import_config("# nothing here\n")
    assert result.changes == {} and result.warnings == ["the file is empty: nothing to import"]
    assert snapshot() == before


def test_it_refuses_a_top_level_list():
    with pytest.raises(ConfigImportError) as exc:
        parse_config_yaml("- compression\n- model\n")
    assert exc.value.line == 1


def test_it_checks_without_saving_in_a_dry_run():
    before = snapshot()
    result = import_config("compression:\n  threshold: 0.7\n", dry_run=True)
    assert result.changes == {"compression": {"threshold": ("0.5", "0.7")}}
    assert snapshot() == before and not SettingsChange.objects.exists()


# --- Management commands ----------------------------------------------------------------------


def test_it_exports_and_imports_with_management_commands(tmp_path):
    settings_store.save_groups(EVERYTHING_CHANGED)
    changed = settings_store.current()
    path = tmp_path / "config.yaml"
    call_command("export_config", str(path), stdout=io.StringIO())
    settings_store.save_group("compression", {"threshold": 0.5, "in_place": False})
    out = io.StringIO()
    call_command("import_config", str(path), stdout=out, stderr=io.StringIO())
    assert settings_store.current() == changed
    assert "compression.threshold: 0.5 → 0.65" in out.getvalue()
    assert SettingsChange.objects.filter(source="command").count() == 2


def test_it_exports_to_standard_output_without_a_file():
    out = io.StringIO()
    call_command("export_config", stdout=out)
    assert yaml.safe_load(out.getvalue())["compression"]["threshold"] == 0.5


def test_it_prints_unknown_keys_from_the_import_command(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("compression:\n  threshold: 0.6\nopenrouter:\n  response_cache: true\n")
    err = io.StringIO()
    call_command("import_config", str(path), stdout=io.StringIO(), stderr=err)
    assert "line 3: unknown section openrouter (ignored)" in err.getvalue()


def test_it_fails_the_import_command_naming_the_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("agent:\n  max_iterations: 10\ncompression:\n  target_ratio: 0.05\n")
    before = snapshot()
    with pytest.raises(CommandError, match=r"line 4: compression.target_ratio must be a number 0.10–0.80"):
        call_command("import_config", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert snapshot() == before


# --- Admin import and export ------------------------------------------------------------------


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


def test_it_imports_an_uploaded_file_from_the_admin(staff_client, admin_user):
    upload = SimpleUploadedFile("config.yaml", b"compression:\n  threshold: 0.7\n  mystery: 1\n")
    response = staff_client.post(reverse("admin:compression_config_import"), {"file": upload, "_import": "Import"},
                                 follow=True)
    assert settings_store.current().compression.threshold == 0.7
    shown = [str(m) for m in response.context["messages"]]
    assert "line 3: unknown key compression.mystery (ignored)" in shown
    assert any("changed 1 setting(s) (compression.threshold)" in m for m in shown)
    assert SettingsChange.objects.get().username == admin_user.username


def test_it_shows_the_failing_line_in_the_admin_and_imports_nothing(staff_client):
    before = snapshot()
    response = staff_client.post(reverse("admin:compression_config_import"),
                                 {"text": "agent:\n  max_iterations: 10\ncompression:\n  threshold: 0\n"})
    assert response.status_code == 200
    page = response.content.decode()
    assert "Nothing was imported" in page
    assert "line 4: compression.threshold must be a number 0.0–1.0 (exclusive of 0)" in page
    assert snapshot() == before


def test_it_checks_a_file_in_the_admin_without_importing(staff_client):
    response = staff_client.post(reverse("admin:compression_config_import"),
                                 {"text": "compression:\n  threshold: 0.7\n", "_check": "Check only"})
    assert response.status_code == 200
    assert any("would change 1 setting(s)" in str(m) for m in response.context["messages"])
    assert settings_store.current().compression.threshold == 0.5


def test_it_downloads_the_export_from_the_admin(staff_client):
    settings_store.save_groups(EVERYTHING_CHANGED)
    response = staff_client.get(reverse("admin:compression_config_export"))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="config.yaml"'
    body = response.content.decode()
    assert yaml.safe_load(body) == config_to_dict(settings_store.current())
    assert SECRET not in body


def test_it_links_import_and_export_from_the_settings_pages(staff_client):
    page = staff_client.get(reverse("admin:compression_compressionsettings_change", args=[1])).content.decode()
    assert reverse("admin:compression_config_import") in page
    assert reverse("admin:compression_config_export") in page
