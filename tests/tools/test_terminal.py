"""The terminal tool: off by default; when on, in the workspace, time-limited, capped, contained."""
from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from compression.core.pruning import summarize_tool_result
from sessions.agent.tools import ToolResult, run_tool


def terminal(workspace, command, **options):
    return run_tool("terminal", {"command": command}, workspace=workspace, terminal_enabled=True, **options)


def _marked_sleep() -> tuple[str, bytes]:
    """A `sleep 60` told apart from every other process by a unique extra (summed) duration.

    Commands run in their own pid namespace, so a pid they report means nothing here: the host's
    /proc is searched for the command line instead.
    """
    extra = f"0.{secrets.randbelow(10**9):09d}"
    return f"sleep 60 {extra}", b"\0".join([b"sleep", b"60", extra.encode(), b""])


def _running(cmdline: bytes) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == cmdline:
                return True  # a zombie's cmdline is empty: only live processes match
        except OSError:
            pass
    return False


def _gone(cmdline: bytes, within: float = 5.0) -> bool:
    """No process with that command line runs (it ended, or is a zombie nobody reaped yet)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _running(cmdline):
            return True
        time.sleep(0.05)
    return False


def test_it_refuses_the_terminal_by_default(workspace):
    result = run_tool("terminal", {"command": "touch made.txt"}, workspace=workspace)
    assert result == ToolResult(
        "Error: the terminal tool is disabled; an administrator can enable it in the settings", is_error=True
    )
    assert not (workspace / "made.txt").exists()


def test_it_runs_a_command_in_the_workspace(workspace):
    result = terminal(workspace, "pwd; echo hello > made.txt; ls")
    assert result == ToolResult(f"{os.path.realpath(workspace)}\nmade.txt\n[exit code: 0]")
    assert (workspace / "made.txt").read_text() == "hello\n"


def test_it_reports_the_exit_code_and_stderr(workspace):
    result = terminal(workspace, "echo oops >&2; exit 3")
    assert result == ToolResult("oops\n[exit code: 3]")
    assert summarize_tool_result("terminal", {"command": "make"}, result.content + "\n" * 300).startswith(
        "[terminal] ran `make` -> exit 3,"
    )


def test_it_does_not_pass_server_secrets_to_commands(workspace, monkeypatch):
    monkeypatch.setenv("HERMES_TEST_SECRET", "s3cr3t")
    assert terminal(workspace, 'echo "[$HERMES_TEST_SECRET]"').content == "[]\n[exit code: 0]"


def test_it_kills_the_process_group_on_timeout(workspace):
    background, cmdline = _marked_sleep()
    started = time.monotonic()
    result = terminal(workspace, f"{background} & echo started; sleep 60", terminal_timeout=1)
    assert time.monotonic() - started < 10
    assert result.is_error
    assert result.content == "started\n[timed out after 1 s; process group killed; exit code: -9]"
    assert _gone(cmdline)


def test_it_leaves_nothing_running_after_the_command(workspace):
    background, cmdline = _marked_sleep()
    started = time.monotonic()
    result = terminal(workspace, f"{background} &")
    assert time.monotonic() - started < 10
    assert result == ToolResult("[exit code: 0]")
    assert _gone(cmdline)


def test_it_leaves_nothing_running_that_left_the_process_group(workspace):
    background, cmdline = _marked_sleep()
    result = terminal(workspace, f"setsid {background} > /dev/null 2>&1 &")
    assert result == ToolResult("[exit code: 0]")
    assert _gone(cmdline)


def test_it_caps_a_flood_of_output(workspace):
    result = terminal(workspace, "yes line | head -n 1000000; echo last", max_output_chars=5_000)
    assert len(result.content) <= 5_000
    assert result.content.startswith("line\nline\n")
    assert "bytes of output omitted ...]" in result.content
    assert result.content.endswith("line\nlast\n[exit code: 0]")
