"""list_files and search_files: recursive, workspace-relative, capped."""
from __future__ import annotations

from sessions.agent.tools import ToolResult, run_tool


def test_it_lists_files_recursively_with_sizes(workspace):
    (workspace / "src" / "pkg").mkdir(parents=True)
    (workspace / "README.md").write_text("# hi\n")
    (workspace / "src" / "pkg" / "mod.py").write_text("x = 1\n" * 300)
    (workspace / "node_modules" / "left-pad").mkdir(parents=True)
    (workspace / "node_modules" / "left-pad" / "index.js").write_text("//")
    result = run_tool("list_files", {}, workspace=workspace)
    assert result == ToolResult(
        "README.md (5 bytes)\nnode_modules/ (not descended)\nsrc/\nsrc/pkg/\nsrc/pkg/mod.py (1,800 bytes)"
    )
    assert run_tool("list_files", {"path": "src/pkg"}, workspace=workspace).content == "src/pkg/mod.py (1,800 bytes)"


def test_it_lists_an_empty_workspace_and_reports_a_missing_folder(workspace):
    assert run_tool("list_files", {"path": "."}, workspace=workspace) == ToolResult("'.' is empty")
    assert run_tool("list_files", {"path": "gone"}, workspace=workspace) == ToolResult(
        "Error: 'gone' does not exist", is_error=True
    )


def test_it_caps_a_long_listing(workspace):
    for i in range(1100):
        (workspace / f"f{i:04}").write_text("")
    lines = run_tool("list_files", {}, workspace=workspace, max_output_chars=100_000).content.splitlines()
    assert len(lines) == 1001
    assert lines[999] == "f0999 (0 bytes)"
    assert lines[-1] == "[listing stopped at 1,000 entries; list a subfolder for more]"


def test_it_searches_with_a_regex(workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("import os\n# TODO: fix\nvalue = 42\n")
    (workspace / "b.txt").write_text("nothing\n  TODO later  \n")
    result = run_tool("search_files", {"pattern": r"TODO|\d{2}"}, workspace=workspace)
    assert result == ToolResult("b.txt:2: TODO later\nsrc/a.py:2: # TODO: fix\nsrc/a.py:3: value = 42")


def test_it_searches_for_a_plain_substring_that_is_not_a_regex(workspace):
    (workspace / "a.py").write_text("call(\nfoo(bar)\n")
    assert run_tool("search_files", {"pattern": "foo("}, workspace=workspace).content == "a.py:2: foo(bar)"


def test_it_searches_only_under_the_given_path(workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "a.py").write_text("TODO one\n")
    (workspace / "b.py").write_text("TODO two\n")
    assert run_tool("search_files", {"pattern": "TODO", "path": "src"}, workspace=workspace).content == "src/a.py:1: TODO one"
    assert run_tool("search_files", {"pattern": "TODO", "path": "b.py"}, workspace=workspace).content == "b.py:1: TODO two"


def test_it_skips_binary_files_when_searching(workspace):
    (workspace / "blob.bin").write_bytes(b"TODO\x00\x01\x02")
    (workspace / "a.txt").write_text("TODO\n")
    assert run_tool("search_files", {"pattern": "TODO"}, workspace=workspace).content == "a.txt:1: TODO"


def test_it_says_when_nothing_matches(workspace):
    (workspace / "a.txt").write_text("hello\n")
    assert run_tool("search_files", {"pattern": "absent"}, workspace=workspace) == ToolResult(
        "No matches for 'absent' in ."
    )


def test_it_stops_searching_at_the_match_cap(workspace):
    (workspace / "many.txt").write_text("hit\n" * 1000)
    lines = run_tool("search_files", {"pattern": "hit"}, workspace=workspace).content.splitlines()
    assert len(lines) == 201
    assert lines[199] == "many.txt:200: hit"
    assert lines[-1] == "[search stopped at 200 matches; narrow the pattern or path]"


def test_it_shows_the_matching_part_of_a_long_line(workspace):
    (workspace / "long.txt").write_text("a" * 5000 + " NEEDLE " + "b" * 5000 + "\n")
    content = run_tool("search_files", {"pattern": "NEEDLE"}, workspace=workspace).content
    assert content.startswith("long.txt:1: …aaa")
    assert "NEEDLE" in content
    assert len(content) < 400
