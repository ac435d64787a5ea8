"""The tools as the model sees them (OpenAI-function style JSON schemas), and argument checking.

Checking covers exactly what these schemas use: required keys, no extra keys, string and integer
types (a bool is not an integer), and integer minimums.
"""
from __future__ import annotations

from typing import Any

from sessions.agent.tools.base import ToolError

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "read_file": {
        "name": "read_file",
        "description": (
            "Read a text file in the workspace. Lines come numbered. For a long file, read a part "
            "with offset (1-based first line) and limit (number of lines)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default 1."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read. Default 2000."},
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "write_file": {
        "name": "write_file",
        "description": (
            "Create or overwrite a file in the workspace with the given content. Missing parent "
            "folders are created."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "File path relative to the workspace."},
                "content": {"type": "string", "description": "The complete new content of the file."},
            },
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
    "list_files": {
        "name": "list_files",
        "description": "List files (with sizes) and folders under a path in the workspace, recursively.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Folder relative to the workspace. Default '.'."},
            },
            "required": [],
            "additionalProperties": False,
        },
    },
    "search_files": {
        "name": "search_files",
        "description": (
            "Search the text files under a path for lines matching a pattern (a regular expression, "
            "or a plain substring). Returns 'file:line: text' for each match."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression or plain text to find."},
                "path": {"type": "string", "description": "Folder or file relative to the workspace. Default '.'."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
    "terminal": {
        "name": "terminal",
        "description": (
            "Run a shell command in the workspace folder and return its output and exit code. "
            "Commands are time-limited and their output is capped; nothing keeps running afterwards."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The shell command line to run."},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
}


def tool_schemas(*, terminal_enabled: bool) -> list[dict[str, Any]]:
    """The schemas to offer the model; terminal only when the admin switch is on."""
    return [schema for name, schema in TOOL_SCHEMAS.items() if terminal_enabled or name != "terminal"]


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "string":
        return isinstance(value, str)
    return True


def check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """Raise ToolError naming the first missing, unexpected or wrongly-typed argument."""
    parameters = TOOL_SCHEMAS[name]["parameters"]
    properties = parameters["properties"]
    missing = [key for key in parameters["required"] if key not in arguments]
    if missing:
        raise ToolError(f"{name} is missing required argument(s): {', '.join(missing)}")
    extra = sorted(key for key in arguments if key not in properties)
    if extra:
        allowed = ", ".join(properties) or "none"
        raise ToolError(f"{name} got unexpected argument(s): {', '.join(extra)} (allowed: {allowed})")
    for key, value in arguments.items():
        spec = properties[key]
        if not _type_ok(value, spec["type"]):
            article = "an" if spec["type"][0] in "aeiou" else "a"
            raise ToolError(f"{name} argument '{key}' must be {article} {spec['type']}, got {type(value).__name__}")
        if "minimum" in spec and value < spec["minimum"]:
            raise ToolError(f"{name} argument '{key}' must be at least {spec['minimum']}, got {value}")
