"""An MCP server built with the SDK's own server class (`mcp.server.mcpserver.MCPServer`), for the
faults the PyPI servers cannot be asked to show: a slow call, a huge result, a server that dies
mid-call, an image, and its own environment.

    python tests/integration/mcp_test_server.py stdio
    python tests/integration/mcp_test_server.py http PORT
"""
from __future__ import annotations

import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.utilities.types import Image

# A 1x1 red PNG.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")

server = MCPServer("probe")


@server.tool()
def echo(text: str) -> str:
    """Return the text as it came."""
    return f"echo: {text}"


@server.tool()
async def slow(seconds: float, started: str = "") -> str:
    """Wait this many seconds, then answer; first create the file ``started`` names, if any."""
    if started:
        open(started, "w").close()
    await asyncio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool()
def big(size: int) -> str:
    """A text result of this many characters."""
    return ("0123456789abcdef" * (size // 16 + 1))[:size]


@server.tool()
async def die(after: float = 0.0) -> str:
    """Exit the whole server process after this many seconds, without answering."""
    await asyncio.sleep(after)
    os._exit(3)


@server.tool()
def environment() -> str:
    """The names and values of this process's environment, one per line."""
    return "\n".join(f"{k}={v}" for k, v in sorted(os.environ.items()))


@server.tool()
def pid() -> str:
    """This server's process id and process group."""
    return f"{os.getpid()} {os.getpgid(0)}"


@server.tool()
def picture() -> Image:
    """A tiny PNG."""
    return Image(data=PNG, format="png")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
