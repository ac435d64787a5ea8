"""The MCP server configuration's one validator and writer (compression.mcp_config): every rule with
its error, the warnings, the audit trail, the generation, the keep placeholder and secrets at rest."""
from __future__ import annotations

import json

import pytest
from django.db import connection

from compression import mcp_config
from compression.mcp_config import KEEP, MCPConfigError, server_delete, server_reload, server_save, validate_server
from compression.models import MCPServer, SettingsChange

pytestmark = pytest.mark.django_db

SECRET = "tok-MCP-SECRET-5150"
TIME = {"command": ".venv/bin/python", "args": ["-m", "mcp_server_time"], "env": {}}
REMOTE = {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": f"Bearer {SECRET}"}}


def errors_of(raw, name="time", **kwargs) -> list[tuple[str, str]]:
    with pytest.raises(MCPConfigError) as exc:
        validate_server(name, raw, **kwargs)
    return exc.value.errors


def saved(name="time", raw=None, **kwargs) -> MCPServer:
    values, _ = validate_server(name, TIME if raw is None else raw)
    return server_save(name, values, **kwargs)


def raw_column(name: str, column: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {MCPServer._meta.db_table} WHERE name = %s", [name])
        return cursor.fetchone()[0]


# --- Validation ---------------------------------------------------------------------------------


def test_it_turns_a_stdio_entry_into_field_values_with_the_defaults():
    values, warnings = validate_server("time", TIME)
    assert values == {"transport": "stdio", "command": ".venv/bin/python", "args": ["-m", "mcp_server_time"],
                      "env": {}, "url": "", "headers": {}, "enabled": True, "timeout": 120.0,
                      "connect_timeout": 60.0, "tools_include": [], "tools_exclude": []}
    assert warnings == []


def test_it_turns_an_http_entry_into_field_values():
    values, _ = validate_server("remote_api", {**REMOTE, "enabled": False, "timeout": 30, "connect_timeout": 5.5,
                                               "tools": {"include": ["a", "b"], "exclude": []}})
    assert (values["transport"], values["url"], values["command"], values["args"]) == (
        "http", "https://mcp.example.com/mcp", "", [])
    assert values["headers"] == {"Authorization": f"Bearer {SECRET}"}
    assert (values["enabled"], values["timeout"], values["connect_timeout"]) == (False, 30.0, 5.5)
    assert (values["tools_include"], values["tools_exclude"]) == (["a", "b"], [])


def test_it_reads_numbers_and_booleans_in_env_as_text():
    values, _ = validate_server("time", {**TIME, "env": {"PORT": 8080, "DEBUG": True, "RATIO": 0.5, "TZ": "UTC"}})
    assert values["env"] == {"PORT": "8080", "DEBUG": "true", "RATIO": "0.5", "TZ": "UTC"}


def test_it_normalises_include_and_exclude_given_as_a_string():
    values, _ = validate_server("time", {**TIME, "tools": {"include": "get_current_time", "exclude": "convert_time"}})
    assert (values["tools_include"], values["tools_exclude"]) == (["get_current_time"], ["convert_time"])


@pytest.mark.parametrize("name", ["time", "git-2", "A_b", "9lives", "x" * 40])
def test_it_accepts_a_valid_name(name):
    validate_server(name, TIME)


# (name, raw entry, key of the error, text in its message)
INVALID = [
    ("bad name", TIME, "name", "letters, digits"),
    ("-time", TIME, "name", "starting with a letter or digit"),
    ("x" * 41, TIME, "name", "1–40"),
    ("", TIME, "name", "1–40"),
    ("time", {}, "command", "is needed"),
    ("time", {"args": ["x"]}, "command", "or a url"),
    ("time", {"command": "uvx", "url": "https://mcp.example.com/mcp"}, "url", "cannot be given together"),
    ("time", {"command": ""}, "command", "non-empty string"),
    ("time", {"command": ["uvx"]}, "command", "non-empty string"),
    ("time", {"command": "uv\x00x"}, "command", "without NUL"),
    ("time", {"command": "uvx", "args": "mcp-server-time"}, "args", "list of strings"),
    ("time", {"command": "uvx", "args": ["--port", 8080]}, "args", 'item 2 is 8080 (quote it: "8080")'),
    ("time", {"command": "uvx", "args": ["a\x00b"]}, "args", "NUL"),
    ("time", {"command": "uvx", "env": ["A=1"]}, "env", "mapping of names to values"),
    ("time", {"command": "uvx", "env": {"1ABC": "x"}}, "env.1ABC", "not a valid variable name"),
    ("time", {"command": "uvx", "env": {"MY-VAR": "x"}}, "env.MY-VAR", "not a valid variable name"),
    ("time", {"command": "uvx", "env": {"A": ["x"]}}, "env.A", "must be a string"),
    ("time", {"command": "uvx", "env": {"A": "x\x00"}}, "env.A", "NUL"),
    ("time", {"url": "ftp://files.example.com/mcp"}, "url", "http:// or https://"),
    ("time", {"url": "https:///mcp"}, "url", "with a host"),
    ("time", {"url": "mcp.example.com"}, "url", "http:// or https://"),
    ("time", {"url": "https://mcp.example.com/a b"}, "url", "without spaces"),
    ("time", {"url": "https://mcp.example.com:port/"}, "url", "with a host"),
    ("time", {"url": 42}, "url", "http(s) URL"),
    ("time", {"url": "https://mcp.example.com", "headers": "Authorization: x"}, "headers", "mapping"),
    ("time", {"url": "https://mcp.example.com", "headers": {"Bad Header": "x"}}, "headers.Bad Header", "RFC 7230"),
    ("time", {"url": "https://mcp.example.com", "headers": {"X:Y": "x"}}, "headers.X:Y", "RFC 7230"),
    ("time", {"url": "https://mcp.example.com", "headers": {"X-A": "a\r\nInjected: 1"}}, "headers.X-A", "CR, LF"),
    ("time", {**TIME, "enabled": "yes"}, "enabled", "true or false"),
    ("time", {**TIME, "enabled": 1}, "enabled", "true or false"),
    ("time", {**TIME, "timeout": 0}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "timeout": -5}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "timeout": 3601}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "timeout": "120"}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "timeout": True}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "timeout": float("nan")}, "timeout", "> 0 and ≤ 3600"),
    ("time", {**TIME, "connect_timeout": 0}, "connect_timeout", "> 0 and ≤ 600"),
    ("time", {**TIME, "connect_timeout": 601}, "connect_timeout", "> 0 and ≤ 600"),
    ("time", {**TIME, "tools": ["a"]}, "tools", "mapping"),
    ("time", {**TIME, "tools": {"include": [1]}}, "tools.include", "tool name or a list of tool names"),
    ("time", {**TIME, "tools": {"exclude": {"a": 1}}}, "tools.exclude", "tool name or a list of tool names"),
    ("time", {**TIME, "tools": {"include": ["a", "b"], "exclude": "b"}}, "tools.exclude", "tools.include names too: b"),
    ("time", "uvx mcp-server-time", "", "mapping of settings"),
]


@pytest.mark.parametrize("name, raw, key, text", INVALID, ids=[f"{k or 'entry'}:{t}" for _, _, k, t in INVALID])
def test_it_refuses_an_invalid_value_naming_its_key(name, raw, key, text):
    errors = errors_of(raw, name=name)
    assert key in [k for k, _ in errors]
    assert any(text in message for k, message in errors if k == key), errors


def test_it_names_every_bad_key_at_once():
    errors = errors_of({"command": "uvx", "args": "x", "env": {"1A": "x"}, "enabled": "no", "timeout": 0,
                        "connect_timeout": 900, "tools": {"include": "a", "exclude": ["a"]}}, name="bad name")
    assert [k for k, _ in errors] == ["name", "args", "env.1A", "enabled", "timeout", "connect_timeout",
                                      "tools.exclude"]


def test_an_error_never_echoes_a_secret_value():
    errors = errors_of({"url": "https://mcp.example.com", "headers": {"X-A": f"{SECRET}\n"}})
    assert SECRET not in str(errors)


def test_it_warns_about_unknown_keys_and_the_unsupported_utility_tools():
    _, warnings = validate_server("time", {**TIME, "sampling": {"enabled": True},
                                           "tools": {"include": "a", "resources": True, "prompts": False, "x": 1}})
    assert warnings == [
        ("sampling", "is not a known key (ignored)"),
        ("tools.resources", "is not supported here (ignored): only the server's tools are offered"),
        ("tools.prompts", "is not supported here (ignored): only the server's tools are offered"),
        ("tools.x", "is not a known key (ignored)"),
    ]


def test_it_warns_about_keys_that_do_not_apply_to_the_transport():
    values, warnings = validate_server("remote", {"url": "https://mcp.example.com/mcp", "args": ["x"], "env": {}})
    assert [k for k, _ in warnings] == ["args", "env"]
    assert values["args"] == [] and values["env"] == {}
    _, warnings = validate_server("time", {**TIME, "headers": {"A": "b"}})
    assert warnings == [("headers", "applies to HTTP servers only (ignored)")]


# --- The keep placeholder -------------------------------------------------------------------------


def test_a_placeholder_keeps_the_stored_value_of_its_key():
    row = saved(raw={**TIME, "env": {"TOKEN": SECRET, "TZ": "UTC"}})
    values, _ = validate_server("time", {**TIME, "env": {"TOKEN": KEEP, "TZ": "Europe/Paris"}},
                                stored=mcp_config.stored_secrets(row))
    assert values["env"] == {"TOKEN": SECRET, "TZ": "Europe/Paris"}


def test_a_placeholder_with_nothing_stored_is_an_error_naming_the_key():
    row = saved(raw={**TIME, "env": {"TOKEN": SECRET}})
    errors = errors_of({**TIME, "env": {"OTHER": KEEP}}, stored=mcp_config.stored_secrets(row))
    assert errors == [("env.OTHER", 'is "***" (keep the stored value), but no value is stored for it: type the value')]
    errors = errors_of({"url": "https://mcp.example.com", "headers": {"Authorization": KEEP}}, name="new", stored={})
    assert [k for k, _ in errors] == ["headers.Authorization"]


def test_server_save_resolves_a_placeholder_under_its_lock():
    saved(raw={**TIME, "env": {"TOKEN": SECRET}})
    values, _ = validate_server("time", {**TIME, "env": {"TOKEN": KEEP}})  # not resolved: stored=None
    assert values["env"] == {"TOKEN": KEEP}
    row = server_save("time", values)
    assert json.loads(row.env) == {"TOKEN": SECRET}
    assert row.generation == 1  # nothing changed
    with pytest.raises(MCPConfigError) as exc:
        server_save("time", {"env": {"NEW": KEEP}})
    assert exc.value.errors[0][0] == "env.NEW"


# --- Writing, the audit trail and the generation ----------------------------------------------------


def test_creating_a_server_is_audited_field_by_field_with_secrets_masked(admin_user):
    server_save("time", validate_server("time", {**TIME, "env": {"TOKEN": SECRET}})[0], user=admin_user)
    rows = {r.field: r for r in SettingsChange.objects.filter(group="mcp_servers.time")}
    assert set(rows) == {"server", *mcp_config.CONFIG_FIELDS}
    assert (rows["server"].old_value, rows["server"].new_value) == ("", "created")
    assert rows["command"].new_value == ".venv/bin/python"
    assert rows["args"].new_value == '["-m", "mcp_server_time"]'
    assert rows["env"].new_value == SettingsChange.MASK
    assert rows["timeout"].new_value == "120"
    assert {r.username for r in rows.values()} == {admin_user.username}
    assert {r.source for r in rows.values()} == {"admin"}
    assert SECRET not in str(list(SettingsChange.objects.values_list("old_value", "new_value")))


def test_a_change_audits_only_the_changed_fields_and_raises_the_generation_by_one(alice):
    row = saved(raw={**TIME, "env": {"TOKEN": SECRET}})
    assert row.generation == 1
    SettingsChange.objects.all().delete()
    values, _ = validate_server("time", {**TIME, "env": {"TOKEN": "another-secret"}, "timeout": 30}, stored={})
    row = server_save("time", values, user=alice, source="import")
    assert row.generation == 2
    changes = {r.field: (r.old_value, r.new_value) for r in SettingsChange.objects.all()}
    assert changes == {"env": (SettingsChange.MASK, SettingsChange.MASK), "timeout": ("120", "30")}
    assert set(SettingsChange.objects.values_list("source", flat=True)) == {"import"}


def test_saving_the_same_values_changes_nothing():
    row = saved()
    count = SettingsChange.objects.count()
    again = saved()
    assert again.generation == row.generation == 1
    assert SettingsChange.objects.count() == count


def test_a_partial_save_keeps_the_other_fields():
    saved(raw={**TIME, "env": {"TOKEN": SECRET}, "tools": {"include": ["a"]}})
    row = server_save("time", {"enabled": False})
    assert (row.enabled, row.command, row.tools_include, json.loads(row.env)) == (
        False, ".venv/bin/python", ["a"], {"TOKEN": SECRET})
    assert row.generation == 2


def test_server_save_validates_what_it_is_given():
    with pytest.raises(MCPConfigError):
        server_save("time", {"command": "uvx", "timeout": 0.0, "transport": "stdio"})
    with pytest.raises(MCPConfigError):
        server_save("bad name", validate_server("time", TIME)[0])
    with pytest.raises(ValueError, match="state"):
        server_save("time", {"state": "connected"})
    assert not MCPServer.objects.exists() and not SettingsChange.objects.exists()


def test_a_save_never_touches_the_state_the_workers_wrote():
    row = saved()
    MCPServer.objects.filter(pk=row.pk).update(state="connected", tools=[{"name": "get_current_time"}],
                                               state_generation=1, last_latency_ms=12.5)
    server_save("time", {"timeout": 10.0})
    row.refresh_from_db()
    assert (row.state, row.tools, row.state_generation, row.last_latency_ms) == (
        "connected", [{"name": "get_current_time"}], 1, 12.5)


def test_reload_raises_the_generation_and_is_audited(alice):
    saved()
    row = server_reload("time", user=alice)
    assert row.generation == 2
    audit = SettingsChange.objects.get(field="reload")
    assert (audit.group, audit.old_value, audit.new_value, audit.username) == ("mcp_servers.time", "1", "2", "alice")
    with pytest.raises(MCPServer.DoesNotExist):
        server_reload("nothing")


def test_delete_is_audited_without_the_secrets(alice):
    saved(raw={**TIME, "env": {"TOKEN": SECRET}})
    assert server_delete("time", user=alice) is True
    assert not MCPServer.objects.exists()
    rows = {r.field: r for r in SettingsChange.objects.filter(username="alice")}
    assert (rows["server"].new_value, rows["command"].old_value, rows["env"].old_value) == (
        "deleted", ".venv/bin/python", SettingsChange.MASK)
    assert server_delete("time") is False


# --- Secrets ----------------------------------------------------------------------------------------


def test_secrets_are_encrypted_at_rest_and_read_back_in_clear():
    saved(raw={**TIME, "env": {"TOKEN": SECRET}})
    saved("remote", REMOTE)
    for name, column in (("time", "env"), ("remote", "headers")):
        stored = raw_column(name, column)
        assert stored.startswith("fernet:") and SECRET not in stored
    assert json.loads(MCPServer.objects.get(name="time").env) == {"TOKEN": SECRET}
    assert MCPServer.objects.get(name="time").headers == "" == raw_column("time", "headers")


def test_the_hermes_entry_masks_every_secret_value():
    row = saved("remote", REMOTE)
    entry = mcp_config.to_hermes(mcp_config.field_values(row))
    assert entry == {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": KEEP}, "enabled": True,
                     "timeout": 120, "connect_timeout": 60}
    assert mcp_config.to_hermes(mcp_config.field_values(row), mask_secrets=False)["headers"] == REMOTE["headers"]
