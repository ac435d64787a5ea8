"""The MCP servers' admin: add and change through the validator (errors on their field, nothing
saved), write-only secrets (never in any rendered page, the audit trail included), the workers'
state shown read-only, Reload (POST + CSRF, change permission) and who may see any of it."""
from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from compression.mcp_config import server_save, validate_server
from compression.models import MCPServer, SettingsChange

pytestmark = pytest.mark.django_db

SECRET = "tok-ADMIN-SECRET-8086"
HEADER_SECRET = "Bearer hdr-SECRET-6502"
ADD = reverse("admin:compression_mcpserver_add")
LIST = reverse("admin:compression_mcpserver_changelist")


def change_url(row: MCPServer) -> str:
    return reverse("admin:compression_mcpserver_change", args=[row.pk])


def reload_url(row: MCPServer) -> str:
    return reverse("admin:compression_mcpserver_reload", args=[row.pk])


def time_server(**overrides) -> dict:
    """What the add form posts for a time server run by this project's own Python."""
    data = {"name": "time", "command": ".venv/bin/python", "args": "-m\nmcp_server_time", "enabled": "on",
            "timeout": "120", "connect_timeout": "60", "env": f"TZ=Europe/Paris\nAPI_TOKEN={SECRET}",
            "include": "get_current_time, convert_time", "exclude": "", "url": "", "headers": ""}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def stored(name: str = "time", **raw) -> MCPServer:
    entry = {"command": ".venv/bin/python", "args": ["-m", "mcp_server_time"], "env": {"API_TOKEN": SECRET}, **raw}
    return server_save(name, validate_server(name, entry)[0])


def change_data(row: MCPServer, **overrides) -> dict:
    """What the change form posts when nothing is touched (the secrets' fields are blank)."""
    data = {"command": row.command, "args": "\n".join(row.args), "url": row.url, "timeout": str(row.timeout),
            "connect_timeout": str(row.connect_timeout), "include": "\n".join(row.tools_include),
            "exclude": "\n".join(row.tools_exclude), "env": "", "headers": ""}
    if row.enabled:
        data["enabled"] = "on"
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def viewer(django_user_model):
    """Staff who may view MCP servers but not change them."""
    user = django_user_model.objects.create_user("victor", password="victor-password-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_mcpserver"))
    return user


# --- Add and change ---------------------------------------------------------------------------------


def test_it_adds_a_time_server_through_the_validator_and_audits_it(staff_client, admin_user):
    response = staff_client.post(ADD, time_server())
    assert response.status_code == 302, response.context["adminform"].form.errors
    row = MCPServer.objects.get(name="time")
    assert (row.transport, row.command, row.args, row.url) == ("stdio", ".venv/bin/python", ["-m", "mcp_server_time"], "")
    assert json.loads(row.env) == {"TZ": "Europe/Paris", "API_TOKEN": SECRET}
    assert (row.enabled, row.timeout, row.connect_timeout) == (True, 120.0, 60.0)
    assert (row.tools_include, row.tools_exclude, row.generation) == (["get_current_time", "convert_time"], [], 1)
    audit = SettingsChange.objects.filter(group="mcp_servers.time")
    assert {"server", "command", "env"} <= set(audit.values_list("field", flat=True))
    assert set(audit.values_list("username", flat=True)) == {admin_user.username}
    assert audit.get(field="env").new_value == SettingsChange.MASK


def test_it_adds_an_http_server_with_headers(staff_client):
    response = staff_client.post(ADD, time_server(name="remote_api", command="", args="", env="",
                                                  url="https://mcp.example.com/mcp", include="",
                                                  headers=f"Authorization: {HEADER_SECRET}\nX-Team: web",
                                                  enabled=None, timeout="30", connect_timeout=""))
    assert response.status_code == 302, response.context["adminform"].form.errors
    row = MCPServer.objects.get(name="remote_api")
    assert (row.transport, row.url, row.enabled, row.timeout, row.connect_timeout) == (
        "http", "https://mcp.example.com/mcp", False, 30.0, 60.0)
    assert json.loads(row.headers) == {"Authorization": HEADER_SECRET, "X-Team": "web"}


# (overrides of the posted add form, the field that must carry the error, text in it)
INVALID = [
    ({"name": "bad name"}, "name", "letters, digits"),
    ({"command": "", "url": ""}, "command", "is needed"),
    ({"url": "https://mcp.example.com/mcp"}, "url", "cannot be given together with command"),
    ({"command": "", "url": "ftp://mcp.example.com"}, "url", "http:// or https://"),
    ({"timeout": "0"}, "timeout", "> 0 and ≤ 3600"),
    ({"timeout": "abc"}, "timeout", "> 0 and ≤ 3600"),
    ({"connect_timeout": "601"}, "connect_timeout", "> 0 and ≤ 600"),
    ({"env": f"1TOKEN={SECRET}"}, "env", "1TOKEN is not a valid variable name"),
    ({"env": f"just {SECRET}"}, "env", "Line 1 is not of the form NAME=value"),
    ({"env": "A=1\nA=2"}, "env", "A is given twice"),
    ({"env": f"API_TOKEN={SECRET}", "clear_env": "on"}, "env", "not both"),
    ({"env": "API_TOKEN=***"}, "env", "no value is stored for it"),
    ({"command": "", "url": "https://mcp.example.com", "headers": "Bad Header: x"}, "headers",
     "not a valid header name"),
    ({"exclude": "convert_time"}, "exclude", "tools.include names too: convert_time"),
]


@pytest.mark.parametrize("overrides, field, text", INVALID, ids=[f"{f}:{t}" for _, f, t in INVALID])
def test_it_shows_an_invalid_value_on_its_field_and_saves_nothing(staff_client, overrides, field, text):
    response = staff_client.post(ADD, time_server(**overrides))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert field in errors and any(text in e for e in errors[field]), errors
    page = response.content.decode()
    assert escape(text) in page
    assert SECRET not in page  # what was just typed is not rendered back either
    assert not MCPServer.objects.exists() and not SettingsChange.objects.exists()


def test_a_name_already_taken_is_refused(staff_client):
    stored()
    response = staff_client.post(ADD, time_server())
    assert response.status_code == 200 and "name" in response.context["adminform"].form.errors
    assert MCPServer.objects.get().generation == 1


def test_a_blank_secret_field_keeps_what_is_stored(staff_client):
    row = stored(env={"API_TOKEN": SECRET, "TZ": "UTC"})
    response = staff_client.post(change_url(row), change_data(row, timeout="30"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    row.refresh_from_db()
    assert json.loads(row.env) == {"API_TOKEN": SECRET, "TZ": "UTC"}
    assert (row.timeout, row.generation) == (30.0, 2)


def test_typed_secrets_replace_them_all_and_a_placeholder_keeps_one(staff_client):
    row = stored(env={"API_TOKEN": SECRET, "TZ": "UTC"})
    staff_client.post(change_url(row), change_data(row, env="API_TOKEN=***\nLANG=C"))
    row.refresh_from_db()
    assert json.loads(row.env) == {"API_TOKEN": SECRET, "LANG": "C"}


def test_remove_all_clears_the_stored_secrets(staff_client):
    row = stored()
    staff_client.post(change_url(row), change_data(row, clear_env="on"))
    row.refresh_from_db()
    assert row.env == ""


def test_an_unchanged_form_changes_nothing(staff_client):
    row = stored(tools={"include": ["a", "b"]})
    count = SettingsChange.objects.count()
    response = staff_client.post(change_url(row), change_data(row))
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.generation == 1 and SettingsChange.objects.count() == count


def test_it_tells_about_warnings_after_saving(staff_client):
    response = staff_client.post(ADD, time_server(name="remote", command="", env="", args="x",
                                                  url="https://mcp.example.com/mcp"), follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert "args applies to stdio servers only (ignored)" in shown
    assert MCPServer.objects.get(name="remote").args == []


# --- Secrets are never rendered ------------------------------------------------------------------------


def test_a_secret_never_appears_in_any_admin_page(staff_client):
    staff_client.post(ADD, time_server())
    staff_client.post(ADD, time_server(name="remote", command="", args="", env="", include="",
                                       url="https://mcp.example.com/mcp", headers=f"Authorization: {HEADER_SECRET}"))
    time, remote = MCPServer.objects.get(name="time"), MCPServer.objects.get(name="remote")
    staff_client.post(change_url(time), change_data(time, timeout="abc", env=f"API_TOKEN={SECRET}"))  # refused
    pages = [LIST, change_url(time), change_url(remote), reverse("admin:compression_mcpserver_history", args=[time.pk]),
             reverse("admin:compression_mcpserver_delete", args=[time.pk]),
             reverse("admin:compression_settingschange_changelist"), reverse("admin:compression_config_export"),
             *(reverse("admin:compression_settingschange_change", args=[pk])
               for pk in SettingsChange.objects.values_list("pk", flat=True))]
    for url in pages:
        response = staff_client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert SECRET not in body and HEADER_SECRET not in body and "hdr-SECRET" not in body, url
    page = staff_client.get(change_url(time)).content.decode()
    assert "Stored variables: API_TOKEN, TZ (values are never shown)" in page
    assert "Stored headers" not in page and "No headers stored" in page


def test_a_viewer_sees_the_server_and_the_names_of_its_secrets_only(client, viewer):
    row = stored(env={"API_TOKEN": SECRET, "TZ": "UTC"})
    client.force_login(viewer)
    response = client.get(change_url(row))
    assert response.status_code == 200
    body = response.content.decode()
    assert SECRET not in body and "API_TOKEN, TZ" in body and ".venv/bin/python" in body
    assert reload_url(row) not in body
    assert client.post(change_url(row), change_data(row, timeout="5")).status_code == 403


# --- The state, read-only -------------------------------------------------------------------------------


def test_the_change_page_shows_the_state_the_workers_wrote(staff_client):
    row = stored()
    MCPServer.objects.filter(pk=row.pk).update(
        state="failing", tools=[{"name": "get_current_time"}, {"name": "convert_time"}], state_generation=1,
        last_error="connection refused by the server", last_latency_ms=12.4, failures=2)
    page = staff_client.get(change_url(row)).content.decode()
    for text in ("failing", "get_current_time, convert_time", "connection refused by the server", "12 ms"):
        assert text in page
    assert 'name="state"' not in page and 'name="last_error"' not in page  # read-only, not inputs
    listing = staff_client.get(LIST).content.decode()
    assert "failing" in listing and "connection refused" in listing and ">2<" in listing


def test_a_posted_state_is_ignored(staff_client):
    row = stored()
    staff_client.post(change_url(row), change_data(row, state="connected", last_error="forged", tools="[]"))
    row.refresh_from_db()
    assert (row.state, row.last_error) == ("unknown", "")


# --- Reload ---------------------------------------------------------------------------------------------------


def test_reload_needs_a_post_with_its_csrf_token_and_raises_the_generation(admin_user):
    row = stored()
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.get(reload_url(row)).status_code == 405
    assert client.post(reload_url(row)).status_code == 403  # no CSRF token
    row.refresh_from_db()
    assert row.generation == 1
    page = client.get(change_url(row)).content.decode()
    form = re.search(r'<form method="post" action="([^"]+)" id="mcp-reload-form">\s*'
                     r'<input type="hidden" name="csrfmiddlewaretoken" value="([^"]+)">', page)
    assert form and form.group(1) == reload_url(row)
    response = client.post(reload_url(row), {"csrfmiddlewaretoken": form.group(2)}, follow=True)
    assert response.redirect_chain[-1][0] == change_url(row)
    assert any("Reloading time (generation 2)" in str(m) for m in response.context["messages"])
    row.refresh_from_db()
    assert row.generation == 2
    audit = SettingsChange.objects.get(field="reload")
    assert (audit.old_value, audit.new_value, audit.username) == ("1", "2", admin_user.username)


def test_reload_needs_the_change_permission(client, viewer):
    row = stored()
    client.force_login(viewer)
    assert client.post(reload_url(row)).status_code == 403
    row.refresh_from_db()
    assert row.generation == 1


def test_the_list_action_reloads_the_selected_servers(staff_client):
    time, git = stored(), stored("git", args=["mcp-server-git", "--repository", "/tmp/repo"])
    other = stored("other")
    response = staff_client.post(LIST, {"action": "reload_selected", "_selected_action": [time.pk, git.pk]},
                                 follow=True)
    assert any("Reloading 2 server(s): git, time" in str(m) for m in response.context["messages"])
    assert [MCPServer.objects.get(pk=r.pk).generation for r in (time, git, other)] == [2, 2, 1]


def test_deleting_a_server_is_audited(staff_client):
    row = stored()
    response = staff_client.post(reverse("admin:compression_mcpserver_delete", args=[row.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not MCPServer.objects.exists()
    assert SettingsChange.objects.filter(group="mcp_servers.time", field="server", new_value="deleted").exists()


# --- Who may see it ------------------------------------------------------------------------------------------


def test_a_user_who_is_not_staff_is_refused(client, alice):
    row = stored()
    client.force_login(alice)
    for url in (LIST, ADD, change_url(row)):
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    client.post(ADD, time_server(name="sneaky"))
    client.post(reload_url(row))
    assert list(MCPServer.objects.values_list("name", "generation")) == [("time", 1)]


def test_staff_without_the_model_permissions_are_refused(client, django_user_model):
    carol = django_user_model.objects.create_user("carol", password="carol-password-1", is_staff=True)
    row = stored()
    client.force_login(carol)
    assert client.get(LIST).status_code == 403
    assert client.get(change_url(row)).status_code == 403
    assert client.post(reload_url(row)).status_code == 403
