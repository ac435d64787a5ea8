"""The terminal's sandbox: a command cannot read the server's secrets, reach the network when that is
off, or write outside its workspace, and where no sandbox can start nothing runs at all.

The server is a real Python process whose environment holds the secrets (as a Celery worker's would),
laid out like the data folder: `hermes.sqlite3` and `secret_key` two levels above the workspace.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.agent.tools import ToolResult, run_tool
from sessions.agent.tools.sandbox import BWRAP_VARIABLE, problem

PROJECT = Path(__file__).resolve().parents[2]
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-SERVER-SECRET-1",
    "HERMES_METRICS_TOKEN": "metrics-SERVER-SECRET-2",
    "SECRET_KEY": "django-SERVER-SECRET-3",
}
AUX_KEY = "sk-aux-SERVER-SECRET-4"
FILE_SECRET_KEY = "django-file-SERVER-SECRET-5"
ATTACKS = [
    "tr '\\0' '\\n' < /proc/$PPID/environ",
    "cat ../../hermes.sqlite3",
    "cat ../../secret_key",
]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data folder with a database holding the auxiliary key in clear and Django's secret key."""
    data = tmp_path / "data"
    (data / "workspaces" / "42").mkdir(parents=True)
    (data / "hermes.sqlite3").write_text(f"SQLite format 3\0auxiliarysettings api_key={AUX_KEY}\n")
    (data / "secret_key").write_text(FILE_SECRET_KEY + "\n")
    return data


def serve(workspace: Path, command: str, **options) -> ToolResult:
    """Run one terminal call in a separate server process started with the secrets in its environment."""
    program = ("import json, sys; from sessions.agent.tools import run_tool; "
               "r = run_tool('terminal', {'command': sys.argv[2]}, workspace=sys.argv[1], terminal_enabled=True, "
               "**json.loads(sys.argv[3])); print(json.dumps([r.content, r.is_error]))")
    env = {**os.environ, **SECRETS, "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, "-c", program, str(workspace), command, json.dumps(options)],
                          env=env, cwd=PROJECT, capture_output=True, text=True, timeout=60, check=True)
    content, is_error = json.loads(done.stdout)
    return ToolResult(content, is_error)


def leaked(text: str) -> list[str]:
    return [s for s in (*SECRETS.values(), AUX_KEY, FILE_SECRET_KEY) if s in text]


@pytest.mark.parametrize("command", ATTACKS)
def test_the_reported_attacks_yield_no_secret(data_dir, command):
    result = serve(data_dir / "workspaces" / "42", command)
    assert leaked(result.content) == []
    if command.startswith("cat"):
        assert "No such file or directory" in result.content


def test_no_process_inside_holds_a_server_secret(data_dir):
    result = serve(data_dir / "workspaces" / "42",
                   "for f in /proc/[0-9]*/environ; do echo \"== $f\"; tr '\\0' '\\n' < $f; done; env")
    assert "== /proc/1/environ" in result.content  # the sandbox's own processes were read
    assert leaked(result.content) == []


def test_the_environment_is_a_clean_minimal_one(workspace, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRETS["ANTHROPIC_API_KEY"])
    result = run_tool("terminal", {"command": "env | cut -d= -f1 | sort"}, workspace=workspace, terminal_enabled=True)
    names = result.content.splitlines()[:-1]
    assert names == sorted(["GIT_PAGER", "HOME", "LANG", "LOGNAME", "PAGER", "PATH", "PWD", "TERM", "TMPDIR",
                            "USER"])
    home = run_tool("terminal", {"command": 'echo "$HOME"; pwd'}, workspace=workspace, terminal_enabled=True)
    assert home.content == f"{os.path.realpath(workspace)}\n{os.path.realpath(workspace)}\n[exit code: 0]"


def test_nothing_of_the_host_but_the_system_and_the_workspace_is_there(data_dir, outside):
    workspace = data_dir / "workspaces" / "42"
    result = serve(workspace, f"ls -A ..; ls -A / | tr '\\n' ' '; echo; cat {outside}/secret.txt; "
                              f"ls {PROJECT}")
    lines = result.content.splitlines()
    assert lines[0] == "42"  # the data folder shows the workspace alone
    assert set(lines[1].split()) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin",
                                     "tmp", "usr"}
    assert "SECRET-VALUE" not in result.content
    assert "No such file or directory" in result.content


def test_only_the_workspace_is_writable(workspace):
    command = ("touch made.txt && echo wrote-workspace; touch /tmp/scratch && echo wrote-private-tmp; "
               "for p in /usr/x /etc/x /x; do touch $p 2>/dev/null && echo wrote-$p; done; "
               "touch ../beside-the-workspace 2>/dev/null; echo done")
    result = run_tool("terminal", {"command": command}, workspace=workspace, terminal_enabled=True)
    assert result.content == "wrote-workspace\nwrote-private-tmp\ndone\n[exit code: 0]"
    assert (workspace / "made.txt").exists()
    # The workspace's parent inside is a private folder (here within the private /tmp): never the host's.
    assert not (workspace.parent / "beside-the-workspace").exists()


def test_no_host_file_kept_from_others_is_readable_inside(workspace):
    # Inside, the sandbox's uid owns what the server's uid owns: were the server root, a bound
    # root-only file or folder (say /etc/ssl/private) would be readable. Only world-readable ones are
    # bound, and mode bits read the same inside as on the host.
    command = "find -L /etc ! -perm -o=r 2>/dev/null; echo checked $(find -L /etc -type f 2>/dev/null | wc -l)"
    result = run_tool("terminal", {"command": command}, workspace=workspace, terminal_enabled=True)
    first, *rest = result.content.splitlines()
    assert rest == ["[exit code: 0]"], first
    assert first.startswith("checked ") and int(first.split()[1]) > 10


def test_it_runs_as_another_uid_without_capabilities(workspace):
    result = run_tool("terminal", {"command": "id -u; whoami; grep CapEff /proc/self/status"},
                      workspace=workspace, terminal_enabled=True)
    assert result.content == "1000\nhermes\nCapEff:\t0000000000000000\n[exit code: 0]"


@pytest.fixture
def listener():
    """A TCP port on the host's loopback that accepts connections (the backlog is enough)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


def _connect(port: int) -> str:
    return f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo connected || echo no-network"


def test_a_command_cannot_reach_the_network_when_it_is_off(workspace, listener):
    result = run_tool("terminal", {"command": _connect(listener)}, workspace=workspace, terminal_enabled=True)
    assert result.content == "no-network\n[exit code: 0]"


def test_a_command_reaches_the_network_when_the_admin_allows_it(workspace, listener):
    result = run_tool("terminal", {"command": _connect(listener)}, workspace=workspace, terminal_enabled=True,
                      terminal_network=True)
    assert result.content == "connected\n[exit code: 0]"


def test_a_missing_sandbox_refuses_to_run_the_command(workspace, monkeypatch, tmp_path):
    monkeypatch.setenv(BWRAP_VARIABLE, str(tmp_path / "no-such-bwrap"))
    result = run_tool("terminal", {"command": "touch made.txt"}, workspace=workspace, terminal_enabled=True)
    assert result == ToolResult(
        "Error: the terminal's sandbox cannot start, so the command did not run: bubblewrap was not found "
        f"({BWRAP_VARIABLE}={tmp_path / 'no-such-bwrap'} is not an executable); install Debian's bubblewrap "
        "package (apt-get install bubblewrap)", is_error=True)
    assert not (workspace / "made.txt").exists()


def test_a_sandbox_that_fails_to_start_refuses_to_run_the_command(workspace, monkeypatch, tmp_path):
    broken = tmp_path / "bwrap"  # the real bubblewrap, refusing to set up (as a kernel without userns would)
    broken.write_text('#!/bin/sh\nexec bwrap --no-such-option "$@"\n')
    broken.chmod(0o755)
    monkeypatch.setenv(BWRAP_VARIABLE, str(broken))
    result = run_tool("terminal", {"command": "touch made.txt; exit 1"}, workspace=workspace, terminal_enabled=True)
    assert result == ToolResult("Error: the terminal's sandbox cannot start, so the command did not run: "
                                "bubblewrap failed: bwrap: Unknown option --no-such-option", is_error=True)
    assert not (workspace / "made.txt").exists()
    assert problem() == "bubblewrap failed: bwrap: Unknown option --no-such-option"


def test_the_probe_passes_where_bubblewrap_works():
    assert problem() is None
    assert problem(network=True) is None
