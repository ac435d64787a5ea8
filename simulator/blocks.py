"""A Messages API body flattened into blocks in prompt-cache prefix order. Pure Python.

Order (anthropic-api.md §4, SPEC §10): each tool definition, each system block, then each content
block of each message. The validator uses this for breakpoint counting, TTL order and prompt size;
the simulator uses it for prefix-cache accounting, so both count tokens the same way.

Token counting is injected (`count_text`), so this module stays free of the tokenizer. A block's
tokens = tokens of its countable text + its images (`image_tokens` of each image's real pixel size,
decoded from its base64 data; a flat 1,500 when the pixels cannot be seen) + its PDFs
(`document_tokens` of the extracted text's tokens and the page count) + a per-message overhead on
the first block of each message (the product's counter adds the same, so the gauge agrees).

Automatic caching (a top-level `cache_control`) becomes one more marker, on the last block that can
carry one (thinking blocks cannot: the breakpoint walks back past them), flagged `automatic`.
Lookback positions follow the documentation: every block is a position of its own, except that a
run of consecutive `tool_use` blocks is one position, and so is a run of `tool_result` blocks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from compression.core.media import document_tokens
from simulator import media

TextCounter = Callable[[str], int]


@dataclass(frozen=True)
class Marker:
    """One `cache_control` in the request: where it is (API path) and its TTL."""

    path: str
    block_index: int  # the flattened block it ends a prefix at
    ttl: str  # "5m" or "1h" (a bare ephemeral marker is 5m)
    raw: Mapping[str, Any]
    automatic: bool = False  # the top-level `cache_control`, placed on the last cacheable block


@dataclass(frozen=True)
class Block:
    section: str  # "tools" | "system" | "messages"
    path: str  # e.g. "tools.0", "system.1", "messages.3.content.2"
    text: str  # countable text
    images: int
    payload: str  # canonical JSON used for prefix hashing (cache_control stripped)
    first_of_message: bool = False
    kind: str = "text"  # "tool" for a tool definition, else the content block's type
    image_tokens: int = 0  # its images' tokens (nested ones of a tool_result included)
    documents: tuple[tuple[str, int], ...] = ()  # (extracted text, pages) of each PDF it holds

    def tokens(self, count_text: TextCounter, message_overhead: int = 0) -> int:
        return (
            count_text(self.text)
            + self.image_tokens
            + sum(document_tokens(count_text(text) if text.strip() else 0, pages) for text, pages in self.documents)
            + (message_overhead if self.first_of_message else 0)
        )


def strip_cache_control(value: Any) -> Any:
    """A copy without any `cache_control` key: moving a breakpoint must not change the prefix."""
    if isinstance(value, Mapping):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _content_list(content: Any) -> list[Any]:
    """String content is shorthand for one text block; the cache treats both forms alike."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return content
    return []


def text_and_images(block: Any) -> tuple[str, int]:
    """The countable text of one content block and how many images it holds."""
    if not isinstance(block, Mapping):
        return (block if isinstance(block, str) else "", 0)
    btype = block.get("type")
    if btype == "text":
        return str(block.get("text") or ""), 0
    if btype == "image":
        return "", 1
    if btype == "document":
        # Its title and context are text; a PDF's pages and text are billed by `attachments`; a
        # plain-text (or content-blocks) document's text is text. Never its base64 payload.
        source = block.get("source")
        kind = source.get("type") if isinstance(source, Mapping) else None
        data = str(source.get("data") or "") if kind == "text" and isinstance(source, Mapping) else ""
        if kind == "content" and isinstance(source, Mapping):
            data = "\n".join(text_and_images(part)[0] for part in _content_list(source.get("content")))
        return "".join(str(v or "") for v in (data, block.get("title"), block.get("context"))), 0
    if btype == "tool_use":
        # The whole call is billed: its id and type as well as its name and input.
        return json.dumps(strip_cache_control(block), ensure_ascii=False, separators=(",", ":"), default=str), 0
    if btype == "tool_result":
        content = block.get("content")
        call_id = str(block.get("tool_use_id") or "")
        if isinstance(content, str):
            return call_id + content, 0
        texts, images = [call_id] if call_id else [], 0
        for part in content or ():
            t, i = text_and_images(part)
            if t:
                texts.append(t)
            images += i
        return "\n".join(texts), images
    if btype == "thinking":
        return str(block.get("thinking") or ""), 0
    return json.dumps(strip_cache_control(block), ensure_ascii=False, default=str), 0


def attachments(block: Any) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The tokens of a content block's images and the (text, pages) of its PDFs, nested ones of a
    `tool_result` included. A document the simulator cannot read (a URL or file source, a damaged
    file) counts one page without text."""
    if not isinstance(block, Mapping):
        return 0, ()
    btype = block.get("type")
    if btype == "image":
        return media.image_block_tokens(block), ()
    if btype == "document":
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") in ("text", "content"):
            return 0, ()
        return 0, (media.document_block(block) or ("", 1),)
    if btype == "tool_result" and isinstance(block.get("content"), list):
        images = 0
        documents: tuple[tuple[str, int], ...] = ()
        for part in block["content"]:
            i, d = attachments(part)
            images, documents = images + i, documents + d
        return images, documents
    return 0, ()


def tool_text(tool: Mapping[str, Any]) -> str:
    """Name + description + JSON schema: the same characters the product's estimator counts."""
    schema = tool.get("input_schema")
    return (
        str(tool.get("name") or "")
        + str(tool.get("description") or "")
        + (json.dumps(schema, ensure_ascii=False, default=str) if schema is not None else "")
    )


def flatten(body: Mapping[str, Any]) -> list[Block]:
    blocks: list[Block] = []
    for i, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, Mapping):
            continue
        blocks.append(Block("tools", f"tools.{i}", tool_text(tool), 0, _canonical(["t", strip_cache_control(tool)]),
                            kind="tool"))
    system = body.get("system")
    for i, block in enumerate(_content_list(system)):
        text, images = text_and_images(block)
        blocks.append(Block("system", f"system.{i}", text, images, _canonical(["s", strip_cache_control(block)]),
                            kind=_kind(block)))
    for m, msg in enumerate(body.get("messages") or ()):
        if not isinstance(msg, Mapping):
            continue
        role = msg.get("role")
        for j, block in enumerate(_content_list(msg.get("content"))):
            text, images = text_and_images(block)
            pixels, documents = attachments(block)
            payload = _canonical(["m", role, strip_cache_control(block)])
            blocks.append(Block("messages", f"messages.{m}.content.{j}", text, images, payload, j == 0, _kind(block),
                                pixels, documents))
    return blocks


def _kind(block: Any) -> str:
    return str(block.get("type") or "text") if isinstance(block, Mapping) else "text"


# Blocks a breakpoint cannot sit on; automatic caching walks back past them.
_NOT_CACHEABLE = ("thinking", "redacted_thinking")
# Runs of these count as one lookback position each (prompt-caching docs, "lookback window").
_RUN_KINDS = ("tool_use", "tool_result")


def lookback_positions(blocks: Iterable[Block]) -> list[int]:
    """The lookback position of every block: consecutive `tool_use` blocks share one, and so do
    consecutive `tool_result` blocks; every other block is a position of its own."""
    out: list[int] = []
    position, previous = -1, None
    for block in blocks:
        if not (block.kind in _RUN_KINDS and block.kind == previous):
            position += 1
        previous = block.kind
        out.append(position)
    return out


def automatic_target(blocks: list[Block]) -> int:
    """Where a top-level `cache_control` lands: the last block that can carry a breakpoint, or -1."""
    for n in range(len(blocks) - 1, -1, -1):
        if blocks[n].kind not in _NOT_CACHEABLE:
            return n
    return -1


def _ttl_of(marker: Any) -> str:
    ttl = marker.get("ttl") if isinstance(marker, Mapping) else None
    return ttl if isinstance(ttl, str) else "5m"


def markers(body: Mapping[str, Any], blocks: list[Block] | None = None) -> list[Marker]:
    """Every `cache_control` in processing order (tools, system, messages), nested ones included.

    A top-level `cache_control` (automatic caching) is one more marker on the last cacheable block;
    when that block carries an explicit marker of the same TTL it adds nothing (the documented
    no-op), with another TTL it is kept so the validator can refuse the conflict.
    """
    blocks = flatten(body) if blocks is None else blocks
    index = {b.path: n for n, b in enumerate(blocks)}
    found: list[Marker] = []

    def visit(value: Any, path: str, block_index: int) -> None:
        if isinstance(value, Mapping):
            cc = value.get("cache_control")
            if cc is not None:
                found.append(Marker(path, block_index, _ttl_of(cc), cc if isinstance(cc, Mapping) else {}))
            content = value.get("content")
            if value.get("type") == "tool_result" and isinstance(content, list):
                for k, part in enumerate(content):
                    visit(part, f"{path}.content.{k}", block_index)

    for i, tool in enumerate(body.get("tools") or ()):
        visit(tool, f"tools.{i}", index.get(f"tools.{i}", -1))
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            visit(block, f"system.{i}", index.get(f"system.{i}", -1))
    for m, msg in enumerate(body.get("messages") or ()):
        if isinstance(msg, Mapping) and isinstance(msg.get("content"), list):
            for j, block in enumerate(msg["content"]):
                path = f"messages.{m}.content.{j}"
                visit(block, path, index.get(path, -1))
    top = body.get("cache_control")
    target = automatic_target(blocks) if top is not None else -1
    if target >= 0:
        ttl = _ttl_of(top)
        if not any(mk.block_index == target and mk.ttl == ttl for mk in found):
            found.append(Marker("cache_control", target, ttl, top if isinstance(top, Mapping) else {}, True))
    return found


def prompt_tokens(
    body: Mapping[str, Any], count_text: TextCounter, *, message_overhead: int = 0
) -> int:
    return sum(b.tokens(count_text, message_overhead) for b in flatten(body))


def prefix_hashes(blocks: Iterable[Block], scope: str) -> list[str]:
    """hash(scope, blocks 0..i) for every i: a chained SHA-256, so each is O(block) to compute."""
    out: list[str] = []
    h = hashlib.sha256(scope.encode("utf-8")).hexdigest()
    for block in blocks:
        h = hashlib.sha256((h + "\x00" + block.payload).encode("utf-8")).hexdigest()
        out.append(h)
    return out
