"""A strict validator for Messages API request bodies, with the API's exact error texts.

Shared by the simulator (which answers 400 with these texts) and the engine's property tests
(which check that whatever the engine produces, once converted, is a request the API accepts).
Texts are quoted from real API responses (Anthropic's documentation and public
reports); where the API's wording is unknown the text follows its pydantic-style
"<path>: <problem>" form.

Pure Python. `validate_messages_request` raises `InvalidRequest` for the first problem found.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simulator import blocks as _blocks
from simulator import media as _media

API_VERSION_2023 = "2023-06-01"
API_VERSION_2026 = "2026-10-21"
SUPPORTED_API_VERSIONS = ("2023-01-01", API_VERSION_2023, API_VERSION_2026)
MAX_BREAKPOINTS = 4
MAX_MESSAGES = 100_000
SAMPLING_PARAMS = ("temperature", "top_p", "top_k")

_MESSAGE_KEYS = frozenset({"role", "content"})
_BLOCK_KEYS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control"},
    "document": {"type", "source", "cache_control", "title", "context", "citations"},
    "search_result": {"type", "source", "title", "content", "cache_control", "citations"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
}
_TOP_LEVEL_KEYS = frozenset(
    {
        "model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream", "metadata",
        "stop_sequences", "thinking", "cache_control", "diagnostics", "output_config", "service_tier",
        "speed", "inference_geo", "container", "context_management", "temperature", "top_p", "top_k",
    }
)

# count_tokens takes the Messages body minus generation-only fields.
_COUNT_TOKENS_KEYS = _TOP_LEVEL_KEYS - {"max_tokens", "stream", "stop_sequences", "metadata", "temperature", "top_p", "top_k"}


class InvalidRequest(Exception):
    """HTTP 400 `invalid_request_error` with the API's message."""

    status_code = 400
    error_type = "invalid_request_error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def tool_use_missing_result_message(index: int, ids: list[str]) -> str:
    return (
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after: "
        f"{', '.join(ids)}. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


def orphan_tool_result_message(index: int, block: int, tool_use_id: str) -> str:
    return (
        f"messages.{index}.content.{block}: unexpected `tool_use_id` found in `tool_result` blocks: "
        f"{tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
        "previous message."
    )


def too_many_breakpoints_message(found: int) -> str:
    return f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."


def automatic_ttl_conflict_message(path: str, automatic: str, explicit: str) -> str:
    # The documentation states the 400 but not its wording; this follows the API's "<path>: <problem>".
    return (
        f"cache_control.ttl: the top-level cache_control (ttl='{automatic}') applies to {path}, which "
        f"already has a cache_control with ttl='{explicit}'"
    )


def ttl_order_message(path: str) -> str:
    """`path` is the marked block's; empty for the top-level (automatic) `cache_control`."""
    return (
        f"{path + '.' if path else ''}cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m' "
        "cache_control block. Note that blocks are processed in the following order: `tools`, "
        "`system`, `messages`."
    )


def prompt_too_long_message(tokens: int, maximum: int) -> str:
    return f"prompt is too long: {tokens} tokens > {maximum} maximum"


def max_tokens_message(requested: int, cap: int, model: str) -> str:
    return (
        f"max_tokens: {requested} > {cap}, which is the maximum allowed number of output tokens "
        f"for {model}"
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_top_level(body: Mapping[str, Any], api_version: str | None, require_max_tokens: bool) -> None:
    if not isinstance(body, Mapping):
        raise InvalidRequest("body: Input should be a valid dictionary")
    if "model" not in body:
        raise InvalidRequest("model: Field required")
    if not isinstance(body["model"], str) or not body["model"]:
        raise InvalidRequest("model: Input should be a valid string")
    if require_max_tokens:
        if "max_tokens" not in body:
            raise InvalidRequest("max_tokens: Field required")
        if not _is_int(body["max_tokens"]) or body["max_tokens"] < 0:
            raise InvalidRequest("max_tokens: Input should be a valid integer greater than or equal to 0")
    if "messages" not in body:
        raise InvalidRequest("messages: Field required")
    allowed = _TOP_LEVEL_KEYS if require_max_tokens else _COUNT_TOKENS_KEYS
    for key in body:
        if key not in allowed:
            raise InvalidRequest(f"{key}: Extra inputs are not permitted")
    if api_version == API_VERSION_2026:
        for key in SAMPLING_PARAMS:
            if key in body:
                raise InvalidRequest(f"{key}: Extra inputs are not permitted")


def _check_text_block(block: Mapping[str, Any]) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        raise InvalidRequest("messages: text content blocks must be non-empty")
    if text == "":
        raise InvalidRequest("messages: text content blocks must be non-empty")
    if not text.strip():
        raise InvalidRequest("messages: text content blocks must contain non-whitespace text")


def _check_block(block: Any, path: str) -> None:
    if not isinstance(block, Mapping):
        raise InvalidRequest(f"{path}: Input should be a valid dictionary")
    btype = block.get("type")
    allowed = _BLOCK_KEYS.get(btype) if isinstance(btype, str) else None
    if allowed is None:
        raise InvalidRequest(f"{path}.type: Input tag '{btype}' found using 'type' does not match any of the expected tags")
    for key in block:
        if key not in allowed:
            raise InvalidRequest(f"{path}.{key}: Extra inputs are not permitted")
    if btype == "text":
        _check_text_block(block)
    elif btype == "tool_use":
        for key in ("id", "name", "input"):
            if key not in block:
                raise InvalidRequest(f"{path}.{key}: Field required")
        if not isinstance(block["input"], Mapping):
            raise InvalidRequest(f"{path}.input: Input should be a valid dictionary")
    elif btype == "tool_result":
        if "tool_use_id" not in block:
            raise InvalidRequest(f"{path}.tool_use_id: Field required")
        content = block.get("content")
        if isinstance(content, list):
            for k, part in enumerate(content):
                _check_block(part, f"{path}.content.{k}")


def _check_messages(messages: Any, strict_roles: bool) -> None:
    if not isinstance(messages, list):
        raise InvalidRequest("messages: Input should be a valid list")
    if not messages:
        raise InvalidRequest("messages: at least one message is required")
    if len(messages) > MAX_MESSAGES:
        raise InvalidRequest(f"messages: a maximum of {MAX_MESSAGES} messages may be provided. Found {len(messages)}.")
    last = len(messages) - 1
    prev_role = None
    for i, msg in enumerate(messages):
        if not isinstance(msg, Mapping):
            raise InvalidRequest(f"messages.{i}: Input should be a valid dictionary")
        for key in msg:
            if key not in _MESSAGE_KEYS:
                raise InvalidRequest(f"messages.{i}.{key}: Extra inputs are not permitted")
        role = msg.get("role")
        if role == "system":
            raise InvalidRequest("role 'system' is not supported on this model")
        if role not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if "content" not in msg:
            raise InvalidRequest(f"messages.{i}.content: Field required")
        if strict_roles:
            if i == 0 and role != "user":
                raise InvalidRequest('messages: first message must use the "user" role')
            if role == prev_role:
                raise InvalidRequest(
                    'messages: roles must alternate between "user" and "assistant", but found multiple '
                    f'"{role}" roles in a row'
                )
        prev_role = role
        content = msg["content"]
        if isinstance(content, str):
            if content == "" and not (i == last and role == "assistant"):
                raise InvalidRequest(
                    f"messages.{i}: all messages must have non-empty content except for the optional "
                    "final assistant message"
                )
            continue
        if not isinstance(content, list):
            raise InvalidRequest(f"messages.{i}.content: Input should be a valid list")
        if not content and not (i == last and role == "assistant"):
            raise InvalidRequest(
                f"messages.{i}: all messages must have non-empty content except for the optional "
                "final assistant message"
            )
        for j, block in enumerate(content):
            _check_block(block, f"messages.{i}.content.{j}")


def _blocks_of(msg: Mapping[str, Any], btype: str) -> list[tuple[int, Mapping[str, Any]]]:
    content = msg.get("content")
    if not isinstance(content, list):
        return []
    return [(j, b) for j, b in enumerate(content) if isinstance(b, Mapping) and b.get("type") == btype]


def _check_tool_pairs(messages: list[Mapping[str, Any]]) -> None:
    """Each tool_use needs its tool_result in the very next message, and vice versa."""
    seen_ids: set[str] = set()
    for i, msg in enumerate(messages):
        uses = _blocks_of(msg, "tool_use") if msg.get("role") == "assistant" else []
        for j, block in uses:
            if block["id"] in seen_ids:
                raise InvalidRequest(f"messages.{i}.content.{j}: `tool_use` ids must be unique")
            seen_ids.add(block["id"])
        if msg.get("role") == "user":
            prev = messages[i - 1] if i > 0 else None
            prev_ids = (
                {b["id"] for _, b in _blocks_of(prev, "tool_use")}
                if prev is not None and prev.get("role") == "assistant"
                else set()
            )
            for j, block in _blocks_of(msg, "tool_result"):
                if block["tool_use_id"] not in prev_ids:
                    raise InvalidRequest(orphan_tool_result_message(i, j, str(block["tool_use_id"])))
        if uses:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = (
                {b["tool_use_id"] for _, b in _blocks_of(nxt, "tool_result")}
                if nxt is not None and nxt.get("role") == "user"
                else set()
            )
            missing = [b["id"] for _, b in uses if b["id"] not in answered]
            if missing:
                raise InvalidRequest(tool_use_missing_result_message(i, missing))


def _check_system_and_tools(body: Mapping[str, Any]) -> None:
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list):
            raise InvalidRequest("system: Input should be a valid string or list")
        for i, block in enumerate(system):
            if not isinstance(block, Mapping) or block.get("type") != "text":
                raise InvalidRequest(f"system.{i}.type: Input should be 'text'")
            for key in block:
                if key not in ("type", "text", "cache_control", "citations"):
                    raise InvalidRequest(f"system.{i}.{key}: Extra inputs are not permitted")
            if not isinstance(block.get("text"), str) or not block["text"]:
                raise InvalidRequest("system: text content blocks must be non-empty")
    tools = body.get("tools")
    if tools is None:
        return
    if not isinstance(tools, list):
        raise InvalidRequest("tools: Input should be a valid list")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise InvalidRequest(f"tools.{i}: Input should be a valid dictionary")
        if "type" in tool and tool.get("type") not in (None, "custom"):
            continue  # server tools (web_search…) have their own shapes
        for key in ("name", "input_schema"):
            if key not in tool:
                raise InvalidRequest(f"tools.{i}.custom.{key}: Field required")
        if tool["name"] in names:
            raise InvalidRequest("tools: Tool names must be unique.")
        names.add(tool["name"])


def _check_cache_control(body: Mapping[str, Any]) -> None:
    """Marker shapes, the 4 slots (a top-level `cache_control` takes one, even as a no-op), the
    automatic marker's TTL against an explicit one on the same block, then the TTL order."""
    top = body.get("cache_control")
    if top is not None and not isinstance(top, Mapping):
        raise InvalidRequest("cache_control: Input should be a valid dictionary")
    found = _blocks.markers(body)
    checked = [("", top)] if top is not None else []
    checked += [(f"{m.path}.", m.raw) for m in found if not m.automatic]
    for prefix, raw in checked:
        if raw.get("type", "ephemeral") != "ephemeral":
            raise InvalidRequest(f"{prefix}cache_control.type: Input should be 'ephemeral'")
        if raw.get("ttl", "5m") not in ("5m", "1h"):
            raise InvalidRequest(f"{prefix}cache_control.ttl: Input should be '5m' or '1h'")
    explicit = [m for m in found if not m.automatic]
    slots = len(explicit) + (top is not None)
    if slots > MAX_BREAKPOINTS:
        raise InvalidRequest(too_many_breakpoints_message(slots))
    for auto in (m for m in found if m.automatic):
        clash = next((m for m in explicit if m.block_index == auto.block_index), None)
        if clash is not None:
            raise InvalidRequest(automatic_ttl_conflict_message(clash.path, auto.ttl, clash.ttl))
    seen_5m = False
    for marker in found:
        if marker.ttl == "5m":
            seen_5m = True
        elif seen_5m:
            raise InvalidRequest(ttl_order_message("" if marker.automatic else marker.path))


def validate_messages_request(
    body: Mapping[str, Any],
    *,
    context_window: int | None = None,
    max_output: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    api_version: str | None = None,
    strict_roles: bool = False,
    require_max_tokens: bool = True,
    message_overhead: int = 0,
    media_window: int | None = None,
) -> None:
    """Raise `InvalidRequest` (the API's text) for the first rule `body` breaks; return None if valid.

    - `context_window`: the prompt (every block of tools, system and messages) must fit:
      "prompt is too long: N tokens > W maximum". Counted with `count_tokens(text)` per block
      (+ its images and PDFs, + `message_overhead` per message); without a counter, chars/4 rounded up.
    - `max_output`: the model's output cap for `max_tokens`.
    - `api_version`: on "2026-10-21" `temperature`/`top_p`/`top_k` are rejected.
    - `strict_roles`: the legacy first-message and alternation rules (the API now merges
      consecutive same-role turns, so they are off by default).
    - `require_max_tokens=False` for `/v1/messages/count_tokens` bodies.
    - `media_window`: the model's context window; given, images and PDFs are decoded and refused
      as the API refuses them (`simulator.media.media_problem`: the limits depend on the window).
      Left out (as the engine's property tests do), attachments are not looked into.
    """
    _check_top_level(body, api_version, require_max_tokens)
    _check_system_and_tools(body)
    _check_messages(body["messages"], strict_roles)
    _check_tool_pairs(body["messages"])
    _check_cache_control(body)
    model = body["model"]
    if require_max_tokens and max_output is not None and body["max_tokens"] > max_output:
        raise InvalidRequest(max_tokens_message(body["max_tokens"], max_output, model))
    if media_window is not None and (problem := _media.media_problem(body, context_window=media_window)):
        raise InvalidRequest(problem)
    if context_window is not None:
        counter = count_tokens or (lambda text: -(-len(text) // 4))
        total = _blocks.prompt_tokens(body, counter, message_overhead=message_overhead)
        if total > context_window:
            raise InvalidRequest(prompt_too_long_message(total, context_window))
