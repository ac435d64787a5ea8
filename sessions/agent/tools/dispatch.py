"""run_tool: the one entry point the agent loop calls for a tool call. It never raises.

Arguments arrive as the model wrote them (a JSON string, or an already-parsed dict); refusals and
failures come back as `ToolResult("Error: …", is_error=True)`, and every result is capped in size
before it can enter the context.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sessions.agent.tools import files, terminal
from sessions.agent.tools.base import (
    DEFAULT_MAX_OUTPUT_CHARS,
    DEFAULT_TERMINAL_TIMEOUT,
    ToolError,
    ToolResult,
    cap_output,
)
from sessions.agent.tools.schemas import TOOL_SCHEMAS, check_arguments
from sessions.agent.tools.workspace import workspace_root

log = logging.getLogger(__name__)

_CAP_HINTS = {
    "read_file": "use offset/limit to read a part",
    "list_files": "list a subfolder",
    "search_files": "narrow the pattern or path",
    "terminal": "redirect the output to a file and read a part",
}


def _parse(name: str, arguments: str | dict | None) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}  # some models send "" for a call without arguments
    if not isinstance(arguments, str):
        raise ToolError(f"arguments for {name} must be a JSON object, got {type(arguments).__name__}")
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(f"invalid JSON arguments for {name}: {exc}") from None
    if not isinstance(parsed, dict):
        raise ToolError(f"arguments for {name} must be a JSON object, got {type(parsed).__name__}")
    return parsed


def _call(name: str, args: dict[str, Any], *, workspace: Path, terminal_enabled: bool,
          terminal_timeout: int, terminal_network: bool, max_output_chars: int) -> ToolResult:
    if name not in TOOL_SCHEMAS:
        offered = ", ".join(n for n in TOOL_SCHEMAS if terminal_enabled or n != "terminal")
        raise ToolError(f"unknown tool '{name}'; available tools: {offered}")
    if name == "terminal" and not terminal_enabled:
        raise ToolError("the terminal tool is disabled; an administrator can enable it in the settings")
    check_arguments(name, args)
    root = workspace_root(workspace)
    if name == "read_file":
        return ToolResult(files.read_file(root, max_chars=max_output_chars, **args))
    if name == "write_file":
        return ToolResult(files.write_file(root, **args))
    if name == "list_files":
        return ToolResult(files.list_files(root, **args))
    if name == "search_files":
        return ToolResult(files.search_files(root, **args))
    output, failed = terminal.run_terminal(root, timeout=terminal_timeout, max_chars=max_output_chars,
                                           network=terminal_network, **args)
    return ToolResult(output, is_error=failed)


def run_tool(
    name: str,
    arguments: str | dict,
    *,
    workspace: Path,
    terminal_enabled: bool = False,
    terminal_timeout: int = DEFAULT_TERMINAL_TIMEOUT,
    terminal_network: bool = False,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> ToolResult:
    """Run one tool call in `workspace` (created if missing) and return what the model should see.

    The terminal runs sandboxed, with network only when `terminal_network` is true.
    """
    try:
        result = _call(name, _parse(name, arguments), workspace=Path(workspace),
                       terminal_enabled=terminal_enabled, terminal_timeout=terminal_timeout,
                       terminal_network=terminal_network, max_output_chars=max_output_chars)
    except ToolError as exc:
        result = ToolResult(f"Error: {exc}", is_error=True)
    except OSError as exc:
        result = ToolResult(f"Error: {name} failed: {exc.strerror or type(exc).__name__}", is_error=True)
    except Exception as exc:  # a tool bug must reach the model as an error, not end the turn
        log.exception("tool %s failed", name)
        result = ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", is_error=True)
    hint = _CAP_HINTS.get(name, "the rest was cut")
    return ToolResult(cap_output(result.content, max_output_chars, hint=hint), result.is_error)
