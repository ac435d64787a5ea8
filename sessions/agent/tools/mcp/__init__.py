"""MCP servers as agent tools (SPEC §13.6), through the official `mcp` SDK.

- `offer`: a server's listed tools as the model sees them (`mcp_<server>_<tool>`), filtered by its
  `tools.include` / `tools.exclude`, and a call's result as a tool message's content.
- `client`: the worker's connections (one per server, per worker process), the tool calls, and the
  server states the workers record for the admin and the staff dashboard.
"""
