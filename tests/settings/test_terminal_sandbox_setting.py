"""Switching the terminal on is refused where its sandbox cannot start (admin form and config.yaml
import alike); the network switch is an ordinary setting, off by default.

"Cannot start" is produced for real: HERMES_SANDBOX_BWRAP names a binary that does not exist, or one
that exits with an error before any command runs.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from compression import settings_store
from compression.yaml_io import ConfigImportError, export_config, import_config
from sessions.agent.tools.sandbox import BWRAP_VARIABLE

from .conftest import change_url, form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def no_sandbox(monkeypatch, tmp_path: Path) -> Path:
    missing = tmp_path / "no-such-bwrap"
    monkeypatch.setenv(BWRAP_VARIABLE, str(missing))
    return missing


def test_the_admin_refuses_to_enable_the_terminal_where_no_sandbox_can_start(staff_client, no_sandbox):
    response = staff_client.post(change_url("agent"), form_data("agent", terminal_enabled=True))
    assert response.status_code == 200  # the form again, with the error
    page = response.content.decode()
    assert "The terminal cannot be enabled: its sandbox cannot start on this server" in page
    assert f"bubblewrap was not found ({BWRAP_VARIABLE}={no_sandbox} is not an executable)" in page
    assert "apt-get install bubblewrap" in page
    assert settings_store.current().agent.terminal_enabled is False


def test_the_admin_refuses_a_sandbox_that_fails_before_running_anything(staff_client, monkeypatch):
    monkeypatch.setenv(BWRAP_VARIABLE, "/bin/false")
    response = staff_client.post(change_url("agent"), form_data("agent", terminal_enabled=True))
    assert "bubblewrap failed: exit code 1" in response.content.decode()
    assert settings_store.current().agent.terminal_enabled is False


def test_the_admin_enables_the_terminal_where_the_sandbox_starts(staff_client):
    response = staff_client.post(change_url("agent"), form_data("agent", terminal_enabled=True,
                                                                terminal_network=True))
    assert response.status_code == 302
    agent = settings_store.current().agent
    assert (agent.terminal_enabled, agent.terminal_network) == (True, True)


def test_other_agent_settings_save_without_a_sandbox_while_the_terminal_is_off(staff_client, no_sandbox):
    response = staff_client.post(change_url("agent"), form_data("agent", max_iterations="50"))
    assert response.status_code == 302
    assert settings_store.current().agent.max_iterations == 50


def test_the_network_is_off_by_default_and_exported():
    assert settings_store.current().agent.terminal_network is False
    settings_store.save_group("agent", {"terminal_network": True})
    assert yaml.safe_load(export_config())["agent"]["terminal_network"] is True


def test_an_import_cannot_enable_the_terminal_where_no_sandbox_can_start(no_sandbox):
    text = "agent:\n  max_iterations: 40\n  terminal_enabled: true\n"
    with pytest.raises(ConfigImportError) as caught:
        import_config(text)
    assert caught.value.line == 3
    assert "agent.terminal_enabled cannot be true: the terminal's sandbox cannot start" in str(caught.value)
    agent = settings_store.current().agent
    assert (agent.terminal_enabled, agent.max_iterations) == (False, 30)  # nothing imported
