"""config.yaml carries Hermes' ``mcp_servers``: a real Hermes-style file imports (warnings with
their lines), a bad server value refuses the whole file naming its line, servers not named are left
alone, and an export followed by an import changes nothing and holds no secret."""
from __future__ import annotations

import json
import textwrap

import pytest
import yaml
from django.urls import reverse

from compression import settings_store
from compression.core.config import GROUPS, config_values
from compression.mcp_config import server_save, validate_server
from compression.models import MCPServer, SettingsChange
from compression.yaml_io import ConfigImportError, export_config, import_config

pytestmark = pytest.mark.django_db

SECRET = "tok-YAML-SECRET-6809"
HEADER_SECRET = "hdr-YAML-SECRET-68000"

HERMES_CONFIG = """\
# ~/.hermes/config.yaml
model:
  default: claude-sonnet-4-5
  provider: anthropic
compression:
  enabled: true
  threshold: 0.6
mcp_servers:
  time:
    command: ".venv/bin/python"
    args: ["-m", "mcp_server_time", "--local-timezone", "Europe/Paris"]
    env:
      TZ: Europe/Paris
    tools:
      include: get_current_time
      resources: false
      prompts: false
  git:
    command: uvx
    args: [mcp-server-git, --repository, /tmp/repo]
    env: {}
    timeout: 300
    tools:
      exclude: [git_reset, git_create_branch]
  remote_api:
    url: "https://mcp.example.com/mcp"
    headers:
      Authorization: "Bearer hdr-YAML-SECRET-68000"
    enabled: false
    timeout: 120
    connect_timeout: 30
    sampling:
      enabled: true
"""


def _yaml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def everything() -> dict:
    """Every setting, every server and the audit trail, for "nothing changed" checks."""
    config = settings_store.current()
    servers = {row.name: {f.name: getattr(row, f.name) for f in MCPServer._meta.fields} for row in MCPServer.objects.all()}
    return {"settings": {g: config_values(getattr(config, g)) for g in GROUPS}, "servers": servers,
            "audit": SettingsChange.objects.count()}


def stored(name: str, entry: dict) -> MCPServer:
    return server_save(name, validate_server(name, entry)[0])


def test_it_imports_a_hermes_config_with_mcp_servers(admin_user):
    result = import_config(HERMES_CONFIG, user=admin_user)
    time, git, remote = (MCPServer.objects.get(name=n) for n in ("time", "git", "remote_api"))
    assert (time.transport, time.command, time.args) == (
        "stdio", ".venv/bin/python", ["-m", "mcp_server_time", "--local-timezone", "Europe/Paris"])
    assert json.loads(time.env) == {"TZ": "Europe/Paris"}
    assert (time.tools_include, time.tools_exclude, time.timeout, time.enabled) == (["get_current_time"], [], 120, True)
    assert (git.command, git.args, git.env, git.timeout, git.connect_timeout) == (
        "uvx", ["mcp-server-git", "--repository", "/tmp/repo"], "", 300, 60)
    assert git.tools_exclude == ["git_reset", "git_create_branch"]
    assert (remote.transport, remote.url, remote.enabled, remote.connect_timeout) == (
        "http", "https://mcp.example.com/mcp", False, 30)
    assert json.loads(remote.headers) == {"Authorization": f"Bearer {HEADER_SECRET}"}
    assert {time.generation, git.generation, remote.generation} == {1}
    assert result.warnings == [
        "line 16: mcp_servers.time.tools.resources is not supported here (ignored): only the server's tools are offered",
        "line 17: mcp_servers.time.tools.prompts is not supported here (ignored): only the server's tools are offered",
        "line 32: mcp_servers.remote_api.sampling is not a known key (ignored)",
    ]
    assert settings_store.current().compression.threshold == 0.6  # the other sections, in the same import
    assert set(result.mcp_changes) == {"time", "git", "remote_api"}
    assert result.mcp_changes["remote_api"]["headers"] == ("", SettingsChange.MASK)
    assert result.changed_count == len(result.changes["compression"]) + len(result.changes["model"]) + sum(
        len(f) for f in result.mcp_changes.values())
    audit = SettingsChange.objects.filter(group__startswith="mcp_servers.")
    assert set(audit.values_list("source", flat=True)) == {"import"}
    assert set(audit.values_list("username", flat=True)) == {admin_user.username}
    assert HEADER_SECRET not in str(list(audit.values_list("old_value", "new_value")))


def test_it_updates_the_servers_named_and_leaves_the_others_alone():
    stored("time", {"command": "uvx", "args": ["mcp-server-time"]})
    stored("other", {"url": "https://other.example.com/mcp"})
    result = import_config(_yaml("""
        mcp_servers:
          time:
            command: uvx
            args: [mcp-server-time]
            timeout: 60
    """))
    assert result.mcp_changes == {"time": {"timeout": ("120", "60")}}
    time, other = MCPServer.objects.get(name="time"), MCPServer.objects.get(name="other")
    assert (time.timeout, time.generation, other.generation) == (60, 2, 1)


def test_a_server_entry_is_complete_keys_left_out_take_the_defaults():
    stored("time", {"command": "uvx", "args": ["mcp-server-time"], "enabled": False, "timeout": 5,
                    "tools": {"include": ["a"]}})
    import_config("mcp_servers:\n  time:\n    command: uvx\n    args: [mcp-server-time]\n")
    row = MCPServer.objects.get(name="time")
    assert (row.enabled, row.timeout, row.tools_include) == (True, 120, [])


# (the file, the errors it must be refused with)
REFUSED = [
    ("""
        mcp_servers:
          time:
            command: uvx
            timeout: 0
    """, [(4, "mcp_servers.time.timeout must be a number of seconds > 0 and ≤ 3600; got 0")]),
    ("""
        mcp_servers:
          git:
            command: uvx
            args: mcp-server-git
            env:
              GIT_TOKEN: ok
              1BAD: x
    """, [(4, "mcp_servers.git.args must be a list of strings, e.g. [mcp-server-time]; got 'mcp-server-git'"),
          (7, "mcp_servers.git.env.1BAD is not a valid variable name (letters, digits and '_', not starting with "
              "a digit)")]),
    ("""
        mcp_servers:
          remote:
            url: ftp://mcp.example.com
            command: uvx
    """, [(4, "mcp_servers.remote.command cannot be given together with url: a server is stdio (command) or HTTP "
              "(url)"),
          (3, "mcp_servers.remote.url cannot be given together with command: a server is stdio (command) or HTTP "
              "(url)")]),
    ("""
        mcp_servers:
          time:
            enabled: true
    """, [(2, "mcp_servers.time.command is needed (the program a stdio server runs), or a url for an HTTP server")]),
    ("""
        mcp_servers:
          bad name:
            command: uvx
    """, [(2, "mcp_servers.bad name must be 1–40 letters, digits, '_' or '-', starting with a letter or digit; "
              "got 'bad name'")]),
    ("""
        mcp_servers:
          remote:
            url: https://mcp.example.com/mcp
            headers:
              Authorization: "***"
    """, [(5, 'mcp_servers.remote.headers.Authorization is "***" (keep the stored value), but no value is stored '
              "for it: type the value")]),
    ("""
        mcp_servers:
          time:
            command: uvx
            tools:
              include: [a, b]
              exclude: b
    """, [(6, "mcp_servers.time.tools.exclude names tools that tools.include names too: b")]),
    ("""
        mcp_servers:
          time:
            command: uvx
            command: python
    """, [(4, "mcp_servers.time.command is given twice (first on line 3)")]),
    ("""
        mcp_servers:
          time: uvx mcp-server-time
    """, [(2, "mcp_servers.time must be a mapping of settings (command: or url:, …)")]),
    ("mcp_servers: [time]\n", [(1, "mcp_servers must be a mapping of server names to their settings")]),
]


@pytest.mark.parametrize("text, errors", REFUSED, ids=[str(e[0][1])[:60] for _, e in REFUSED])
def test_a_bad_server_refuses_the_whole_file_naming_the_line(text, errors):
    stored("other", {"command": "uvx", "args": ["other"], "env": {"TOKEN": SECRET}})
    before = everything()
    with pytest.raises(ConfigImportError) as exc:
        import_config(_yaml(text) + "compression:\n  threshold: 0.7\n")  # valid, and refused with the rest
    assert exc.value.errors == errors
    assert everything() == before


def test_a_bad_server_and_a_bad_setting_are_reported_together_and_nothing_changes():
    before = everything()
    text = _yaml("""
        compression:
          threshold: 1.5
        mcp_servers:
          good:
            command: uvx
          bad:
            url: https://mcp.example.com
            connect_timeout: 900
    """)
    with pytest.raises(ConfigImportError) as exc:
        import_config(text)
    assert exc.value.errors == [
        (2, "compression.threshold must be a number 0.0–1.0 (exclusive of 0); got 1.5"),
        (8, "mcp_servers.bad.connect_timeout must be a number of seconds > 0 and ≤ 600; got 900"),
    ]
    assert everything() == before


def test_a_dry_run_changes_nothing():
    before = everything()
    result = import_config(HERMES_CONFIG, dry_run=True)
    assert set(result.mcp_changes) == {"time", "git", "remote_api"}
    assert everything() == before


def test_an_export_then_an_import_changes_nothing_and_the_export_holds_no_secret():
    import_config(HERMES_CONFIG)
    stored("vault", {"command": "uvx", "args": ["mcp-vault"], "env": {"VAULT_TOKEN": SECRET, "PORT": 8200}})
    before = everything()
    exported = export_config()
    assert SECRET not in exported and HEADER_SECRET not in exported
    result = import_config(exported)
    assert result.mcp_changes == {} and result.changes == {} and result.warnings == []
    assert everything() == before
    assert export_config() == exported


def test_it_exports_the_servers_in_hermes_layout():
    import_config(HERMES_CONFIG)
    stored("vault", {"command": "uvx", "args": ["mcp-vault"], "env": {"VAULT_TOKEN": SECRET}})
    servers = yaml.safe_load(export_config())["mcp_servers"]
    assert list(servers) == ["git", "remote_api", "time", "vault"]
    assert servers["git"] == {"command": "uvx", "args": ["mcp-server-git", "--repository", "/tmp/repo"], "env": {},
                              "enabled": True, "timeout": 300, "connect_timeout": 60,
                              "tools": {"exclude": ["git_reset", "git_create_branch"]}}
    assert servers["remote_api"] == {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "***"},
                                     "enabled": False, "timeout": 120, "connect_timeout": 30}
    assert servers["time"]["tools"] == {"include": ["get_current_time"]}
    assert servers["vault"]["env"] == {"VAULT_TOKEN": "***"}


def test_an_exported_placeholder_keeps_the_secret_and_a_new_value_replaces_it():
    stored("vault", {"command": "uvx", "env": {"VAULT_TOKEN": SECRET, "MODE": "ro"}})
    import_config(export_config().replace("MODE: '***'", "MODE: rw"))
    assert json.loads(MCPServer.objects.get(name="vault").env) == {"VAULT_TOKEN": SECRET, "MODE": "rw"}


def test_an_export_without_servers_has_no_mcp_section():
    assert "mcp_servers" not in yaml.safe_load(export_config())


def test_the_admin_import_names_the_changed_servers_and_their_warnings(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("admin:compression_config_import"), {"text": HERMES_CONFIG}, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert any("mcp_servers.git.command" in m and "mcp_servers.remote_api.url" in m for m in shown), shown
    assert "line 32: mcp_servers.remote_api.sampling is not a known key (ignored)" in shown
    assert MCPServer.objects.count() == 3


def test_the_admin_import_shows_a_bad_server_line_and_imports_nothing(client, admin_user):
    client.force_login(admin_user)
    response = client.post(reverse("admin:compression_config_import"),
                           {"text": "mcp_servers:\n  time:\n    command: uvx\n    timeout: -1\n"})
    assert response.status_code == 200
    assert "line 4: mcp_servers.time.timeout must be a number of seconds &gt; 0 and ≤ 3600" in response.content.decode()
    assert not MCPServer.objects.exists()
