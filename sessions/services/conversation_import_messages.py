"""The checks of an imported message: its role, content blocks, tool calls, size, and the pairing
of tool results with the calls they answer.

- Content is null, a string, or a list of blocks, each an object whose ``type`` is one of
  ``PART_TYPES`` (the blocks the project's providers send: ``llm.convert``).
- A message's text (every string it holds except inline media data) is at most
  ``message_max_chars()``: ``MESSAGE_MAX_CHARS`` (1,000,000), or the composer's
  ``HERMES_MAX_MESSAGE_CHARS`` when an installation set that higher. Inline media data (an image's
  data URL, a PDF's base64) is at most ``MEDIA_MAX_CHARS`` a block.
- Tool calls only on assistant messages, each ``{id, type: "function", function: {name, arguments}}``
  with ``arguments`` a string; a tool message names the call it answers in ``tool_call_id``.
- Pairing, per session in order (``ToolPairs``): a tool result must answer a call an earlier
  assistant message of the session made; in the live context (messages not archived), the calls
  of an assistant message must all be answered before the next message that is not a tool result.
  Calls left unanswered at the very end of the active session are reported (``open_calls``): the
  import answers them with a stub, as a stopped turn does, so the next request is valid.
"""
from __future__ import annotations

import re

from django.conf import settings

from sessions.services.conversation_import_checks import (
    ImportRefused,
    array,
    choice,
    field,
    integer,
    join,
    obj,
    storable,
    text,
    type_name,
)

ROLES = ("system", "user", "assistant", "tool")
PART_TYPES = ("text", "image_url", "input_image", "image", "document", "thinking", "redacted_thinking",
              "search_result")
MESSAGE_MAX_CHARS = 1_000_000
MEDIA_MAX_CHARS = 48 * 1024 * 1024  # base64 of a 32 MiB PDF (the Messages API's request limit) fits
NAME_MAX_CHARS = 100  # Message.name and Message.tool_call_id
MAX_DEPTH = 32
_DATA_HEAD = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def message_max_chars() -> int:
    return max(MESSAGE_MAX_CHARS, settings.HERMES_MAX_MESSAGE_CHARS)


class _Size:
    """The characters of text read so far of one message (or one other record: ``what``)."""

    def __init__(self, what: str = "the message") -> None:
        self.what = what
        self.chars = 0

    def add(self, value: str, path: str) -> None:
        self.chars += len(value)
        limit = message_max_chars()
        if self.chars > limit:
            raise ImportRefused(path, f"too long: {self.what} holds more than {limit:,} characters of text "
                                      f"(the import's limit for one message)")


def _is_media(path: list, key: str) -> bool:
    """Inline media data: an image's URL (``image_url.url``) or a block source's ``data``."""
    return (key == "url" and path[-1:] == ["image_url"]) or (key == "data" and path[-1:] == ["source"])


def _scan(value, path: str, size: _Size, keys: list, depth: int = 0) -> None:
    """Every string of ``value`` storable and counted (media data against its own cap)."""
    if depth > MAX_DEPTH:
        raise ImportRefused(path, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        if keys and _is_media(keys[:-1], keys[-1]):
            if len(value) > MEDIA_MAX_CHARS:
                raise ImportRefused(path, f"too long: {len(value):,} characters of inline media (at most "
                                          f"{MEDIA_MAX_CHARS:,})")
            storable(value, path)
        else:
            size.add(value, path)
            storable(value, path)
    elif isinstance(value, dict):
        for key, item in value.items():
            storable(key, path)
            _scan(item, join(path, key), size, [*keys, key], depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _scan(item, join(path, i), size, keys, depth + 1)


def _part(part, path: str) -> None:
    part = obj(part, path)
    kind = choice(field(part, "type", path), join(path, "type"), PART_TYPES)
    if kind == "text":
        text(field(part, "text", path), join(path, "text"))
    elif kind == "image_url":
        image, url_path = field(part, "image_url", path), join(path, "image_url")
        if isinstance(image, dict):
            image, url_path = field(image, "url", url_path), join(url_path, "url")
        url = text(image, url_path, empty=False)
        head = _DATA_HEAD.match(url) if url.startswith("data:") else None
        if url.startswith("data:") and (head is None or _BASE64.fullmatch(url, head.end()) is None):
            raise ImportRefused(url_path, "is not a valid base64 data URL")
    elif kind in ("image", "document"):
        obj(field(part, "source", path), join(path, "source"))
    for meta in ("_image", "_document"):  # what the upload side noted; "attachment" is an attachment's id
        if meta in part:
            where = join(path, meta)
            if "attachment" in obj(part[meta], where):
                integer(part[meta]["attachment"], join(where, "attachment"), minimum=1, maximum=2**63 - 1, null=True)


def content_checked(value, path: str, size: _Size):
    """Null, a string or a list of blocks (``PART_TYPES``)."""
    if value is None or isinstance(value, str):
        _scan(value, path, size, [])
        return value
    if not isinstance(value, list):
        raise ImportRefused(path, f"must be a string, a list of blocks or null, not {type_name(value)}")
    for i, part in enumerate(value):
        _part(part, join(path, i))
    _scan(value, path, size, [])
    return value


def tool_calls_checked(value, path: str, size: _Size) -> list | None:
    if value is None:
        return None
    calls = array(value, path)
    seen: set[str] = set()
    for i, call in enumerate(calls):
        where = join(path, i)
        call = obj(call, where)
        call_id = text(field(call, "id", where), join(where, "id"), max_chars=NAME_MAX_CHARS, empty=False)
        if call_id in seen:
            raise ImportRefused(join(where, "id"), f"the id {call_id!r} is used twice in this message")
        seen.add(call_id)
        if "type" in call:
            choice(call["type"], join(where, "type"), ("function",))
        function = obj(field(call, "function", where), join(where, "function"))
        fn_path = join(where, "function")
        text(field(function, "name", fn_path), join(fn_path, "name"), max_chars=200, empty=False)
        arguments = field(function, "arguments", fn_path, "")
        if not isinstance(arguments, str):
            raise ImportRefused(join(fn_path, "arguments"), f"must be a string (the arguments as JSON text), not "
                                                            f"{type_name(arguments)}")
    _scan(calls, path, size, [])
    return calls or None


def json_checked(value, path: str, what: str) -> None:
    """Any JSON value kept as it is (a session's engine state): storable, and within the limit."""
    _scan(value, path, _Size(what), [])


def message_checked(raw, path: str) -> dict:
    """The chat fields of one message (role, content, tool_calls, tool_call_id, name), checked."""
    record = obj(raw, path)
    role = choice(field(record, "role", path), join(path, "role"), ROLES)
    size = _Size()
    content = content_checked(record.get("content"), join(path, "content"), size)
    tool_calls = tool_calls_checked(record.get("tool_calls"), join(path, "tool_calls"), size)
    if tool_calls and role != "assistant":
        raise ImportRefused(join(path, "tool_calls"), f"only an assistant message makes tool calls (this is a {role} "
                                                       f"message)")
    tool_call_id = record.get("tool_call_id") or ""
    tool_call_id = text(tool_call_id, join(path, "tool_call_id"), max_chars=NAME_MAX_CHARS)
    if role == "tool" and not tool_call_id:
        raise ImportRefused(join(path, "tool_call_id"), "a tool result must name the call it answers")
    if tool_call_id and role != "tool":
        raise ImportRefused(join(path, "tool_call_id"), f"only a tool result answers a call (this is a {role} message)")
    name = text(record.get("name") or "", join(path, "name"), max_chars=NAME_MAX_CHARS)
    size.add(name, join(path, "name"))
    if role in ("user", "system") and content is None:
        raise ImportRefused(join(path, "content"), f"a {role} message needs content")
    return {"role": role, "content": content, "tool_calls": tool_calls, "tool_call_id": tool_call_id, "name": name}


class ToolPairs:
    """Tool results against the calls they answer, for one session read in order."""

    def __init__(self) -> None:
        self.called: set[str] = set()
        # The live context's open calls: id → (its path, the tool's name).
        self.pending: dict[str, tuple[str, str]] = {}

    def add(self, message: dict, path: str, *, live: bool) -> None:
        if live and self.pending and message["role"] != "tool":
            call_path = next(iter(self.pending.values()))[0]
            raise ImportRefused(call_path, "no tool result answers this call before the next message "
                                           f"({path}); the model's API refuses such a history")
        if message["role"] == "assistant":
            for i, call in enumerate(message["tool_calls"] or ()):
                self.called.add(call["id"])
                if live:
                    self.pending[call["id"]] = (join(join(join(path, "tool_calls"), i), "id"), call["function"]["name"])
        elif message["role"] == "tool":
            if message["tool_call_id"] not in self.called:
                raise ImportRefused(join(path, "tool_call_id"), f"answers a tool call {message['tool_call_id']!r} "
                                                                 "that no earlier assistant message made")
            if live:
                self.pending.pop(message["tool_call_id"], None)

    def open_calls(self) -> list[tuple[str, str]]:
        """(call id, tool name) of the calls still unanswered, in order."""
        return [(call_id, name) for call_id, (_, name) in self.pending.items()]
