"""run_tool as the agent loop sees it: parsing, validation, errors as results, the output cap."""
from __future__ import annotations

import json

import pytest

from sessions.agent.tools import TOOL_SCHEMAS, ToolResult, files, run_tool, tool_schemas


def test_it_offers_terminal_only_when_enabled():
    off = [schema["name"] for schema in tool_schemas(terminal_enabled=False)]
    on = [schema["name"] for schema in tool_schemas(terminal_enabled=True)]
    assert off == ["read_file", "write_file", "list_files", "search_files"]
    assert on == off + ["terminal"]


def test_it_describes_each_tool_as_a_function_schema():
    for name, schema in TOOL_SCHEMAS.items():
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["name"] == name
        assert schema["parameters"]["type"] == "object"
        assert set(schema["parameters"]["required"]) <= set(schema["parameters"]["properties"])
    json.dumps(TOOL_SCHEMAS)  # sendable as is


def test_it_accepts_arguments_as_json_string_or_dict(workspace):
    (workspace / "a.txt").write_text("alpha\n")
    as_string = run_tool("read_file", '{"path": "a.txt"}', workspace=workspace)
    as_dict = run_tool("read_file", {"path": "a.txt"}, workspace=workspace)
    assert as_string == as_dict == ToolResult("     1\talpha")


def test_it_treats_empty_arguments_as_no_arguments(workspace):
    (workspace / "a.txt").write_text("alpha\n")
    assert run_tool("list_files", "", workspace=workspace) == ToolResult("a.txt (6 bytes)")


def test_it_reports_invalid_json_arguments(workspace):
    result = run_tool("read_file", '{"path": "a.txt"', workspace=workspace)
    assert result.is_error
    assert result.content.startswith("Error: invalid JSON arguments for read_file: ")
    assert "delimiter" in result.content


def test_it_reports_arguments_that_are_not_an_object(workspace):
    result = run_tool("read_file", '["a.txt"]', workspace=workspace)
    assert result == ToolResult("Error: arguments for read_file must be a JSON object, got list", is_error=True)


def test_it_reports_an_unknown_tool(workspace):
    result = run_tool("delete_everything", "{}", workspace=workspace)
    assert result.is_error
    assert result.content == (
        "Error: unknown tool 'delete_everything'; available tools: read_file, write_file, list_files, search_files"
    )


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("read_file", {}, "Error: read_file is missing required argument(s): path"),
        ("write_file", {"path": "a.txt"}, "Error: write_file is missing required argument(s): content"),
        ("read_file", {"path": "a.txt", "lines": 3},
         "Error: read_file got unexpected argument(s): lines (allowed: path, offset, limit)"),
        ("read_file", {"path": 7}, "Error: read_file argument 'path' must be a string, got int"),
        ("read_file", {"path": "a.txt", "offset": "3"}, "Error: read_file argument 'offset' must be an integer, got str"),
        ("read_file", {"path": "a.txt", "limit": True}, "Error: read_file argument 'limit' must be an integer, got bool"),
        ("read_file", {"path": "a.txt", "offset": 0}, "Error: read_file argument 'offset' must be at least 1, got 0"),
        ("search_files", {"pattern": None}, "Error: search_files argument 'pattern' must be a string, got NoneType"),
    ],
)
def test_it_reports_bad_arguments(workspace, name, arguments, message):
    (workspace / "a.txt").write_text("alpha\n")
    assert run_tool(name, arguments, workspace=workspace) == ToolResult(message, is_error=True)


def test_it_creates_the_workspace_if_missing(tmp_path):
    workspace = tmp_path / "data" / "conversations" / "42"
    result = run_tool("write_file", {"path": "notes.txt", "content": "hi"}, workspace=workspace)
    assert not result.is_error
    assert (workspace / "notes.txt").read_text() == "hi"


def test_it_turns_a_tool_crash_into_an_error_result(workspace, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(files, "list_files", broken)
    result = run_tool("list_files", {}, workspace=workspace)
    assert result == ToolResult("Error: list_files failed: RuntimeError: disk on fire", is_error=True)


def test_it_caps_oversized_output_with_a_note(workspace):
    # 200 matches of ~300 chars each: well over the cap before it is applied.
    (workspace / "big.txt").write_text(("needle " + "x" * 400 + "\n") * 300)
    result = run_tool("search_files", {"pattern": "needle"}, workspace=workspace)
    assert len(result.content) <= 20_000
    assert result.content.startswith("big.txt:1: needle xxx")
    assert result.content.endswith(" chars total; narrow the pattern or path]")
    assert "\n[output truncated: 6" in result.content  # ~60,000 chars before the cut


def test_it_caps_output_at_the_configured_size(workspace):
    for i in range(50):
        (workspace / f"file-{i:02}.txt").write_text("x")
    result = run_tool("list_files", {}, workspace=workspace, max_output_chars=300)
    assert len(result.content) <= 300
    assert result.content.startswith("file-00.txt (1 bytes)\nfile-01.txt")
    assert result.content.endswith("chars total; list a subfolder]")
