"""What a server's tools look like to the model, and what a call's result looks like in the context.

Pure functions, no Django and no network: the names (`mcp_<server>_<tool>`, limited to what every
route accepts: letters, digits, `_` and `-`, at most 64 characters), the input schemas (an MCP
`inputSchema` is a JSON Schema object; the agent's tool shape carries it as `parameters`), the
include/exclude filter, and the conversion of a `CallToolResult` into text and image parts
(images stay images, never base64 text; text over the cap is cut with a marker).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sessions.agent.tools.base import DEFAULT_MAX_OUTPUT_CHARS, cap_output

PREFIX = "mcp_"
MAX_NAME = 64
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def tool_name(server: str, tool: str) -> str:
    """The name the model calls: ``mcp_<server>_<tool>``, made safe; a name too long for the API
    keeps its start and gains a short hash of the whole, so two long names stay distinct."""
    name = _UNSAFE.sub("_", f"{PREFIX}{server}_{tool}")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:MAX_NAME - 9]}_{digest}"


def as_list(value: Any) -> list[str]:
    """Hermes accepts a string or a list for ``include``/``exclude``."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [v.strip() for v in re.split(r"[,\n]", value) if v.strip()]
    return [str(v) for v in value if str(v).strip()]


def selected(tools: Iterable[Mapping[str, Any]], include: Any, exclude: Any) -> list[Mapping[str, Any]]:
    """The listed tools the configuration lets through: only ``include`` when it names any, never ``exclude``."""
    inc, exc = set(as_list(include)), set(as_list(exclude))
    return [t for t in tools if (not inc or t.get("name") in inc) and t.get("name") not in exc]


def input_schema(schema: Any) -> dict[str, Any]:
    """An MCP ``inputSchema`` as a tool's ``parameters``: always an object schema."""
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {}}
    out = dict(schema)
    out.setdefault("type", "object")
    if out.get("type") == "object":
        out.setdefault("properties", {})
    return out


def listed(tool: Any) -> dict[str, Any]:
    """One entry of a ``tools/list`` answer (an SDK ``Tool``), as stored on the server's row."""
    return {"name": str(tool.name), "description": str(getattr(tool, "description", "") or ""),
            "input_schema": input_schema(getattr(tool, "inputSchema", None) or getattr(tool, "input_schema", None))}


def schemas(server: str, tools: Iterable[Mapping[str, Any]], include: Any = None, exclude: Any = None) -> list[dict]:
    """The server's tools in the agent's schema shape (name, description, parameters)."""
    out = []
    for tool in selected(tools, include, exclude):
        description = str(tool.get("description") or "").strip()
        out.append({"name": tool_name(server, str(tool["name"])),
                    "description": f"[MCP {server}] {description}".strip(),
                    "parameters": input_schema(tool.get("input_schema"))})
    return out


def result_content(result: Any, *, max_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> tuple[Any, bool]:
    """A ``CallToolResult`` as a tool message's content and whether it is an error.

    Text parts (and embedded text resources, resource links, structured content when nothing else
    came) are joined and capped at ``max_chars`` with a marker; images become image parts. With no
    image the content is plain text.
    """
    texts: list[str] = []
    images: list[dict] = []
    for part in getattr(result, "content", None) or []:
        kind = getattr(part, "type", "")
        if kind == "text":
            texts.append(str(part.text))
        elif kind == "image":
            mime = str(getattr(part, "mimeType", "") or getattr(part, "mime_type", "") or "")
            if mime in IMAGE_TYPES:
                images.append({"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part.data}"}})
            else:
                texts.append(f"[an image of type {mime or 'unknown'} was left out: the model takes PNG, JPEG, GIF or WebP]")
        elif kind == "audio":
            texts.append("[an audio result was left out: the model does not take audio]")
        elif kind == "resource":
            resource = part.resource
            text = getattr(resource, "text", None)
            texts.append(str(text) if text is not None else f"[a binary resource {resource.uri} was left out]")
        elif kind == "resource_link":
            texts.append(f"[resource {getattr(part, 'name', '')}: {part.uri}]")
    structured = getattr(result, "structuredContent", None) or getattr(result, "structured_content", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False))
    text = cap_output("\n".join(texts), max_chars, hint="the rest of the MCP result was cut")
    is_error = bool(getattr(result, "isError", False) or getattr(result, "is_error", False))
    if is_error:
        text = f"Error: {text}" if text else "Error: the tool reported an error without a message"
    if not images:
        return text, is_error
    return ([{"type": "text", "text": text}] if text else []) + images, is_error
