"""The agent's workspace tools (SPEC §11): read_file, write_file, list_files, search_files, terminal.

Guarantees: every path is confined to the workspace (no `..`, absolute-path or symlink escape);
every result is capped in size; `run_tool` never raises. The terminal is off unless enabled.
"""
from sessions.agent.tools.base import ToolResult
from sessions.agent.tools.dispatch import run_tool
from sessions.agent.tools.schemas import TOOL_SCHEMAS, tool_schemas

__all__ = ["TOOL_SCHEMAS", "ToolResult", "run_tool", "tool_schemas"]
