"""Paths stay inside the workspace: no `..`, absolute-path or symlink escape, in every tool."""
from __future__ import annotations

import os

import pytest

from sessions.agent.tools import run_tool

ESCAPES = ["../x", "/etc/passwd", "sub/../../x", "../outside/secret.txt", "sub/../../ws-evil/x", "./../ws/../x"]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize(
    ("tool", "extra"),
    [("read_file", {}), ("write_file", {"content": "pwned"}), ("list_files", {}), ("search_files", {"pattern": "S"})],
)
def test_it_refuses_paths_outside_the_workspace(workspace, outside, tool, extra, path):
    (workspace / "sub").mkdir()
    result = run_tool(tool, {"path": path, **extra}, workspace=workspace)
    assert result.is_error
    assert result.content == f"Error: path '{path}' is outside the workspace"
    assert "SECRET" not in result.content
    assert not (workspace.parent / "x").exists()
    assert not (workspace.parent / "ws-evil").exists()
    assert (outside / "secret.txt").read_text() == "SECRET-VALUE\n"


def test_it_allows_dotdot_that_stays_inside(workspace):
    (workspace / "sub").mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    assert run_tool("read_file", {"path": "sub/../a.txt"}, workspace=workspace).content == "     1\talpha"


def test_it_allows_an_absolute_path_inside_the_workspace(workspace):
    (workspace / "a.txt").write_text("alpha\n")
    result = run_tool("read_file", {"path": str(workspace / "a.txt")}, workspace=workspace)
    assert result.content == "     1\talpha"


def test_it_refuses_reading_through_a_symlink_to_a_file_outside(workspace, outside):
    os.symlink(outside / "secret.txt", workspace / "link.txt")
    result = run_tool("read_file", {"path": "link.txt"}, workspace=workspace)
    assert result.is_error
    assert result.content == "Error: path 'link.txt' is outside the workspace"


def test_it_refuses_writing_through_a_symlink_to_a_file_outside(workspace, outside):
    os.symlink(outside / "secret.txt", workspace / "link.txt")
    result = run_tool("write_file", {"path": "link.txt", "content": "pwned"}, workspace=workspace)
    assert result.is_error
    assert (outside / "secret.txt").read_text() == "SECRET-VALUE\n"


def test_it_refuses_paths_through_a_symlinked_folder_outside(workspace, outside):
    os.symlink(outside, workspace / "linkdir")
    calls = [
        ("read_file", {"path": "linkdir/secret.txt"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "pwned"}),
        ("write_file", {"path": "linkdir/deep/er/new.txt", "content": "pwned"}),
        ("list_files", {"path": "linkdir"}),
        ("search_files", {"pattern": "SECRET", "path": "linkdir"}),
        ("read_file", {"path": "linkdir/../outside/secret.txt"}),
    ]
    for tool, arguments in calls:
        result = run_tool(tool, arguments, workspace=workspace)
        assert result.content == f"Error: path '{arguments['path']}' is outside the workspace", tool
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_it_lists_without_following_a_symlink_out(workspace, outside):
    (workspace / "mine.txt").write_text("mine\n")
    os.symlink(outside, workspace / "linkdir")
    os.symlink(outside / "secret.txt", workspace / "link.txt")
    result = run_tool("list_files", {}, workspace=workspace)
    assert result.content.splitlines() == [
        "link.txt -> outside the workspace (symlink, not followed)",
        "linkdir -> outside the workspace (symlink, not followed)",
        "mine.txt (5 bytes)",
    ]


def test_it_searches_without_following_a_symlink_out(workspace, outside):
    (workspace / "mine.txt").write_text("no secrets here\n")
    os.symlink(outside, workspace / "linkdir")
    os.symlink(outside / "secret.txt", workspace / "link.txt")
    result = run_tool("search_files", {"pattern": "SECRET"}, workspace=workspace)
    assert result.content == "No matches for 'SECRET' in ."


def test_it_follows_a_symlink_that_stays_inside(workspace):
    (workspace / "real").mkdir()
    (workspace / "real" / "a.txt").write_text("alpha\n")
    os.symlink(workspace / "real", workspace / "alias")
    assert run_tool("read_file", {"path": "alias/a.txt"}, workspace=workspace).content == "     1\talpha"
    listing = run_tool("list_files", {}, workspace=workspace).content.splitlines()
    assert listing == ["alias -> real (symlink, not followed)", "real/", "real/a.txt (6 bytes)"]


def test_it_works_when_the_workspace_itself_is_reached_through_a_symlink(tmp_path):
    real = tmp_path / "real-ws"
    real.mkdir()
    (real / "a.txt").write_text("alpha\n")
    os.symlink(real, tmp_path / "ws-link")
    workspace = tmp_path / "ws-link"
    assert run_tool("read_file", {"path": "a.txt"}, workspace=workspace).content == "     1\talpha"
    by_link = run_tool("read_file", {"path": str(workspace / "a.txt")}, workspace=workspace)
    assert by_link.content == "     1\talpha"
    assert run_tool("read_file", {"path": "../a.txt"}, workspace=workspace).is_error
