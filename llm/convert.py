"""Internal (OpenAI-style) messages <-> Anthropic Messages API bodies. Pure Python, no IO.

Guarantees of `to_anthropic_request`:
- never mutates its inputs;
- `_`-prefixed metadata keys never reach the body (on messages, content parts and tool schemas);
- every system message becomes `system` text blocks, in order;
- consecutive tool messages become one user message of `tool_result` blocks;
- assistant `tool_calls` become `tool_use` blocks with parsed JSON input;
- `cache_control` markers survive: on content parts as given, and a message-level marker (the
  caching module puts one on empty-content assistant/tool messages) moves onto that message's last
  block — the `tool_result` block for a tool message;
- empty text parts are dropped (the API rejects them), and a message left with no blocks is
  dropped with them;
- attachments go as the API takes them: an `image_url` part becomes an `image` block, a `document`
  part (a base64 PDF) goes as it is; their `_image` / `_document` metadata never does.

`document_as_text` is the OpenAI-compatible route's form of a `document` part (that wire has no
PDF block): the text the upload side extracted, or a note that there is none.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

JsonDict = dict[str, Any]

# Block types the Messages API accepts as-is inside message content.
_NATIVE_BLOCK_TYPES = frozenset(
    {"text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use", "tool_result"}
)


def _strip_meta(d: Mapping[str, Any]) -> JsonDict:
    return {k: v for k, v in d.items() if not (isinstance(k, str) and k.startswith("_"))}


def document_as_text(part: Mapping[str, Any]) -> JsonDict:
    """A `document` part as a text part: "[PDF <name>, N pages]\n<extracted text>" from its
    `_document` metadata, or, when the text is empty (a scan), "[PDF <name>, N pages: it has no text
    layer, so its content cannot be read on this route]". A `cache_control` on the part is kept."""
    meta = part.get("_document")
    meta = meta if isinstance(meta, Mapping) else {}
    name = next((str(v).strip() for v in (meta.get("name"), part.get("title")) if isinstance(v, str) and v.strip()),
                "document.pdf")
    pages = meta.get("pages")
    head = f"PDF {name}"
    if isinstance(pages, int) and not isinstance(pages, bool) and pages >= 0:
        head += f", {pages} page" + ("" if pages == 1 else "s")
    text = meta.get("text")
    source = part.get("source")
    if not isinstance(text, str) and isinstance(source, Mapping) and source.get("type") == "text":
        text = source.get("data")  # a plain-text document carries its text itself
    if isinstance(text, str) and text.strip():
        out: JsonDict = {"type": "text", "text": f"[{head}]\n{text}"}
    else:
        out = {"type": "text", "text": f"[{head}: it has no text layer, so its content cannot be read on this route]"}
    if part.get("cache_control"):
        out["cache_control"] = copy.deepcopy(part["cache_control"])
    return out


def _image_from_url(url: str) -> JsonDict:
    if url.startswith("data:") and ";base64," in url:
        header, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": header or "image/png", "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _convert_part(part: Any) -> JsonDict | None:
    """One internal content part -> one Anthropic block (None when it must be dropped)."""
    if isinstance(part, str):
        return {"type": "text", "text": part} if part else None
    if not isinstance(part, Mapping):
        return None
    part = _strip_meta(part)
    ptype = part.get("type")
    marker = part.get("cache_control")
    block: JsonDict | None
    if ptype == "text" or (ptype is None and "text" in part):
        text = part.get("text") or ""
        if not text:
            return None
        block = {"type": "text", "text": text}
        if part.get("citations"):
            block["citations"] = copy.deepcopy(part["citations"])
    elif ptype == "image_url":
        iu = part.get("image_url")
        url = iu.get("url") if isinstance(iu, Mapping) else iu
        block = _image_from_url(str(url or ""))
    elif ptype == "input_image":
        block = _image_from_url(str(part.get("image_url") or part.get("url") or ""))
    elif ptype in _NATIVE_BLOCK_TYPES:
        block = copy.deepcopy({k: v for k, v in part.items() if k != "cache_control"})
        if ptype == "thinking":
            # Markers on thinking blocks break their signatures; the API rejects them.
            marker = None
    else:
        return None
    if marker:
        block["cache_control"] = copy.deepcopy(marker)
    return block


def _content_blocks(content: Any) -> list[JsonDict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, Mapping):
        content = [content]
    blocks = []
    for part in content:
        block = _convert_part(part)
        if block is not None:
            blocks.append(block)
    return blocks


def _parse_arguments(arguments: Any) -> JsonDict:
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments:
        return {}
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        # The API demands an object; keep the model's text visible rather than dropping it.
        return {"raw_arguments": str(arguments)}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _tool_use_blocks(tool_calls: Iterable[Mapping[str, Any]]) -> list[JsonDict]:
    blocks = []
    for call in tool_calls or ():
        fn = call.get("function") or {}
        block: JsonDict = {
            "type": "tool_use",
            "id": call.get("id") or "",
            "name": fn.get("name") or call.get("name") or "",
            "input": _parse_arguments(fn.get("arguments", call.get("arguments"))),
        }
        if call.get("cache_control"):
            block["cache_control"] = copy.deepcopy(call["cache_control"])
        blocks.append(block)
    return blocks


def _tool_result_content(content: Any) -> Any:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return _content_blocks(content)


def _tool_result_block(msg: Mapping[str, Any]) -> JsonDict:
    block: JsonDict = {
        "type": "tool_result",
        "tool_use_id": msg.get("tool_call_id") or "",
        "content": _tool_result_content(msg.get("content")),
    }
    if msg.get("is_error"):
        block["is_error"] = True
    if msg.get("cache_control"):
        block["cache_control"] = copy.deepcopy(msg["cache_control"])
    return block


def _attach_marker(blocks: list[JsonDict], marker: Any) -> None:
    """Put a message-level marker on the last block that can carry one (not thinking blocks)."""
    if not marker:
        return
    for block in reversed(blocks):
        if block.get("type") not in ("thinking", "redacted_thinking"):
            block["cache_control"] = copy.deepcopy(marker)
            return


def convert_tool_schema(tool: Mapping[str, Any]) -> JsonDict:
    """OpenAI `{type: function, function: {...}}`, simple `{name, description, parameters}` or an
    Anthropic `{name, description, input_schema}` schema -> Anthropic tool definition."""
    tool = _strip_meta(tool)
    function = tool.get("function")
    spec = _strip_meta(function if isinstance(function, Mapping) else tool)
    schema = spec.get("input_schema", spec.get("parameters"))
    if schema is None:
        schema = {"type": "object", "properties": {}}
    out: JsonDict = {"name": spec.get("name") or "", "input_schema": copy.deepcopy(schema)}
    if spec.get("description"):
        out["description"] = spec["description"]
    marker = tool.get("cache_control") or spec.get("cache_control")
    if marker:
        out["cache_control"] = copy.deepcopy(marker)
    return out


def convert_messages(messages: Iterable[Mapping[str, Any]]) -> tuple[list[JsonDict], list[JsonDict]]:
    """Internal messages -> (system blocks, Anthropic messages)."""
    system: list[JsonDict] = []
    out: list[JsonDict] = []
    pending_results: list[JsonDict] = []

    def flush_results() -> None:
        if pending_results:
            out.append({"role": "user", "content": list(pending_results)})
            pending_results.clear()

    for raw in messages:
        msg = _strip_meta(raw)
        role = msg.get("role")
        if role == "tool":
            pending_results.append(_tool_result_block(msg))
            continue
        flush_results()
        if role in ("system", "developer"):
            blocks = [b for b in _content_blocks(msg.get("content")) if b.get("type") == "text"]
            _attach_marker(blocks, msg.get("cache_control"))
            system.extend(blocks)
            continue
        blocks = _content_blocks(msg.get("content"))
        if role == "assistant":
            blocks.extend(_tool_use_blocks(msg.get("tool_calls") or ()))
        elif role != "user":
            continue
        _attach_marker(blocks, msg.get("cache_control"))
        if blocks:
            out.append({"role": role, "content": blocks})
    flush_results()
    return system, out


def to_anthropic_request(
    messages: Iterable[Mapping[str, Any]],
    *,
    model: str,
    max_tokens: int,
    tools: Iterable[Mapping[str, Any]] | None = None,
    stream: bool = False,
    **extra: Any,
) -> JsonDict:
    """A Messages API body (keyword arguments of `client.messages.create`) from internal messages.

    `extra` keys (tool_choice, metadata, stop_sequences, a top-level cache_control…) are copied in
    unchanged; a `system` given there is prepended to the system blocks from the messages.
    """
    system, converted = convert_messages(messages)
    body: JsonDict = {"model": model, "max_tokens": max_tokens, "messages": converted}
    extra = dict(extra)
    extra_system = extra.pop("system", None)
    if extra_system:
        system = _content_blocks(extra_system) + system
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [convert_tool_schema(t) for t in tools]
    if stream:
        body["stream"] = True
    for key, value in extra.items():
        if value is not None:
            body[key] = copy.deepcopy(value)
    return body


def _as_dict(obj: Any) -> JsonDict:
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"cannot read an Anthropic response from {type(obj).__name__}")


def from_anthropic_response(response: Any) -> JsonDict:
    """An Anthropic Message (dict or SDK object) -> internal assistant message.

    Text blocks are joined; `tool_use` blocks become `tool_calls` with JSON-string arguments;
    thinking blocks are not carried (they are never sent back by this product).
    """
    data = _as_dict(response)
    texts: list[str] = []
    calls: list[JsonDict] = []
    for block in data.get("content") or ():
        block = _as_dict(block)
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(
                {
                    "id": block.get("id") or "",
                    "type": "function",
                    "function": {
                        "name": block.get("name") or "",
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
    message: JsonDict = {"role": "assistant", "content": "".join(texts)}
    if calls:
        message["tool_calls"] = calls
    return message
