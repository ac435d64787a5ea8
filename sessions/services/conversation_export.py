"""A conversation's complete record as one JSON document (format ``hermes-web/1``,
docs/export-format.md), produced as a stream of strings.

Guarantees of ``iter_json``:
- the concatenation of its chunks is one JSON object; every message, session, compaction event
  and attachment is read with ``QuerySet.iterator`` and serialised on its own, and file bytes are
  read and base64-encoded in blocks, so memory stays flat however long the conversation is;
- it holds no secret: the settings part leaves out every secret field (``compression.core.config.
  is_secret``: the API keys), an endpoint's URL loses its user, password and query; nothing of
  the MCP servers' configuration and no token is read at all;
- the attachments' original bytes and the workspace's regular files are included in base64 up to
  ``FILE_MAX_BYTES`` a file and ``FILES_MAX_BYTES`` in all (attachments first, then the workspace
  folder by folder); a file over a cap, a symbolic link or an unreadable file is listed with
  ``"data": null`` and ``"omitted"`` saying why. At most ``FILES_MAX_COUNT`` workspace entries are
  listed; the rest are counted in ``"unlisted"``.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit, urlunsplit

from django.utils import timezone

from compression.core.caching import prompt_caching_status
from compression.core.config import config_values, is_secret
from sessions.models import Attachment, CompressionEvent, Conversation, Message, Session
from sessions.services import runtime

FORMAT = "hermes-web/1"
FILE_MAX_BYTES = 20 * 1024 * 1024  # a file's bytes are included up to this size (an attachment's own limit)
FILES_MAX_BYTES = 64 * 1024 * 1024  # all files of one export together (base64 makes it about 85 MiB)
FILES_MAX_COUNT = 5_000  # workspace entries listed
MESSAGE_CHUNK = 100  # rows read from the database at a time
_READ_BLOCK = 3 * 64 * 1024  # a multiple of 3: each block's base64 joins the next without padding

SETTINGS_NOTE = ("Hermes Web stores no settings snapshot with a conversation: these are the effective settings "
                 "at the time of the export, not necessarily those every earlier turn ran with.")

MESSAGE_FIELDS = ("id", "session_id", "seq", "role", "content", "tool_calls", "tool_call_id", "name", "token_count",
                  "archived", "is_summary", "visible", "stopped", "replaced", "created_at")
SESSION_FIELDS = ("id", "parent_id", "started_at", "ended_at", "end_reason", "system_prompt", "compression_count",
                  "previous_summary", "cooldown_until", "ineffective_count", "last_prompt_tokens",
                  "counted_prompt_tokens", "context_length", "engine_state")
EVENT_FIELDS = ("id", "session_id", "new_session_id", "summary_message_id", "trigger", "status", "phase", "reason",
                "focus_topic", "in_place", "messages_before", "messages_after", "tokens_before", "tokens_after",
                "pruned_count", "summarized_count", "summary", "aux_model", "messages_read", "tokens_read",
                "summariser_calls", "aux_failure", "duration_ms", "cost", "started_at", "finished_at")
ATTACHMENT_FIELDS = ("id", "message_id", "kind", "name", "size", "media_type", "width", "height", "pages", "has_text",
                     "sha256", "workspace_name", "created_at")
# Foreign keys are written under the name of what they point to: "session", not "session_id".
_RENAMED = {"session_id": "session", "parent_id": "parent", "new_session_id": "new_session",
            "summary_message_id": "summary_message", "message_id": "message"}


def _dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _plain(row: dict) -> dict:
    """A ``values()`` row as JSON-ready data: dates as ISO 8601, decimals as strings."""
    out = {}
    for key, value in row.items():
        if hasattr(value, "isoformat"):
            value = value.isoformat()
        elif key == "cost":
            value = str(value)
        out[_RENAMED.get(key, key)] = value
    return out


def _items(rows: Iterable[dict]) -> Iterator[str]:
    """The members of a JSON array, one chunk each, one a line."""
    separator = "\n"
    for row in rows:
        yield separator + _dumps(_plain(row))
        separator = ",\n"


def public_url(url: str) -> str:
    """``url`` without its user, password, query and fragment (where a key could hide)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _public(group: str, config) -> dict:
    values = {k: v for k, v in config_values(config).items() if not is_secret(group, k)}
    if "base_url" in values:
        values["base_url"] = public_url(values["base_url"])
    return values


def settings_snapshot(conversation: Conversation) -> dict:
    """The effective compression, auxiliary-model, prompt-caching and context-engine settings for
    this conversation, secrets left out, and a note that they are those of the export's time."""
    cfg = runtime.current_config()
    aux = cfg.auxiliary
    follows_main = aux.provider in ("auto", "main")
    caching = prompt_caching_status(conversation.model, conversation.provider, "")
    return {
        "snapshot": False,
        "note": SETTINGS_NOTE,
        "compression": _public("compression", cfg.compression),
        "auxiliary": {**_public("auxiliary", aux),
                      "effective_provider": conversation.provider if follows_main else aux.provider,
                      "effective_model": aux.model or conversation.model},
        "prompt_caching": {**_public("caching", cfg.caching), "enabled": caching.enabled, "route": caching.route,
                           "reason": caching.reason},
        "context": _public("context", cfg.context),
        "model": {"provider": conversation.provider, "model": conversation.model,
                  "context_window": runtime.model_window(conversation, cfg), "max_tokens": conversation.max_tokens},
    }


def _conversation(conversation: Conversation) -> dict:
    return {"id": str(conversation.id), "title": conversation.title, "title_manual": conversation.title_manual,
            "provider": conversation.provider, "model": conversation.model,
            "context_length": conversation.context_length, "max_tokens": conversation.max_tokens,
            "mcp_off": list(conversation.mcp_off or []), "created_at": conversation.created_at.isoformat(),
            "last_activity_at": conversation.last_activity_at.isoformat()}


# Files ---------------------------------------------------------------------------------------------

class _Budget:
    """What is left of ``FILES_MAX_BYTES``, and what was included and left out."""

    def __init__(self) -> None:
        self.left = FILES_MAX_BYTES
        self.included = 0
        self.included_bytes = 0
        self.omitted = 0

    def refusal(self, size: int) -> str:
        if size > FILE_MAX_BYTES:
            return f"larger than the per-file cap of {FILE_MAX_BYTES:,} bytes"
        if size > self.left:
            return f"over the cap of {FILES_MAX_BYTES:,} bytes for all the files of one export"
        return ""

    def spend(self, size: int) -> None:
        self.left -= size
        self.included += 1
        self.included_bytes += size


def _base64_blocks(handle: IO[bytes], size: int, digest) -> Iterator[str]:
    """The first ``size`` bytes of ``handle`` as base64, block by block (a short read carried over,
    so the pieces join into one valid base64 text)."""
    carry, read = b"", 0
    while read < size:
        block = handle.read(min(_READ_BLOCK, size - read))
        if not block:
            break
        read += len(block)
        digest.update(block)
        block = carry + block
        whole = len(block) - len(block) % 3
        carry = block[whole:]
        if whole:
            yield base64.b64encode(block[:whole]).decode("ascii")
    if carry:
        yield base64.b64encode(carry).decode("ascii")


def _file_entry(meta: dict, path: Path, budget: _Budget, *, trailer: bool) -> Iterator[str]:
    """One file's entry: ``meta`` with ``data`` (base64, streamed) or ``data: null`` and why;
    with ``trailer`` the bytes' ``sha256`` follows the data."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = "a symbolic link: not exported" if path.is_symlink() else f"cannot be read ({exc.strerror})"
        budget.omitted += 1
        yield _dumps({**meta, "data": None, "omitted": reason})
        return
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        reason = "" if stat.S_ISREG(info.st_mode) else "not a regular file"
        reason = reason or budget.refusal(info.st_size)
        if reason:
            budget.omitted += 1
            yield _dumps({**meta, "size": info.st_size, "data": None, "omitted": reason})
            return
        head = {**meta, "size": info.st_size} if "size" not in meta else meta
        yield _dumps(head)[:-1] + ',"data":"'
        digest = hashlib.sha256()
        yield from _base64_blocks(handle, info.st_size, digest)
        budget.spend(info.st_size)
        yield f'","sha256":"{digest.hexdigest()}"}}' if trailer else '"}'


def _attachments(conversation: Conversation, budget: _Budget) -> Iterator[str]:
    rows = (Attachment.objects.filter(conversation=conversation, message__isnull=False).order_by("id")
            .values("storage", *ATTACHMENT_FIELDS).iterator(chunk_size=MESSAGE_CHUNK))
    separator = "\n"
    for row in rows:
        storage = row.pop("storage")
        yield separator
        yield from _file_entry(_plain(row), Attachment(storage=storage).path, budget, trailer=False)
        separator = ",\n"


def workspace_paths(root: Path) -> Iterator[tuple[str, Path]]:
    """Every file and link of the workspace as (relative POSIX path, path), folder by folder (a
    folder's files and links by name, then its subfolders by name); links to folders are listed,
    never followed."""
    if root.is_symlink() or not root.is_dir():
        return
    for folder, folders, files in os.walk(root, followlinks=False):
        here = Path(folder)
        links = [name for name in folders if (here / name).is_symlink()]
        folders[:] = sorted(name for name in folders if name not in links)
        for name in sorted([*files, *links]):
            yield (here / name).relative_to(root).as_posix(), here / name


def _workspace(conversation: Conversation, budget: _Budget) -> Iterator[str]:
    separator, listed, unlisted = "\n", 0, 0
    for relative, path in workspace_paths(Path(conversation.workspace)):
        if listed >= FILES_MAX_COUNT:
            unlisted += 1
            continue
        yield separator
        yield from _file_entry({"path": relative}, path, budget, trailer=True)
        separator, listed = ",\n", listed + 1
    yield f'],"unlisted":{unlisted}'


# The document ----------------------------------------------------------------------------------------

def iter_json(conversation: Conversation) -> Iterator[str]:
    """The conversation's complete record as chunks of one JSON document (see the module docstring)."""
    budget = _Budget()
    head = {"format": FORMAT, "exported_at": timezone.now().isoformat(), "generator": "Hermes Web",
            "limits": {"file_max_bytes": FILE_MAX_BYTES, "files_max_bytes": FILES_MAX_BYTES,
                       "files_max_count": FILES_MAX_COUNT},
            "conversation": _conversation(conversation), "settings": settings_snapshot(conversation)}
    yield _dumps(head)[:-1]
    yield ',\n"sessions":['
    yield from _items(Session.objects.filter(conversation=conversation).order_by("id")
                      .values(*SESSION_FIELDS).iterator(chunk_size=MESSAGE_CHUNK))
    yield '],\n"messages":['
    messages = 0
    for chunk in _items(Message.objects.filter(conversation=conversation).order_by("id")
                        .values(*MESSAGE_FIELDS).iterator(chunk_size=MESSAGE_CHUNK)):
        messages += 1
        yield chunk
    yield '],\n"compaction_events":['
    yield from _items(CompressionEvent.objects.filter(conversation=conversation).order_by("id")
                      .values(*EVENT_FIELDS).iterator(chunk_size=MESSAGE_CHUNK))
    yield '],\n"attachments":['
    yield from _attachments(conversation, budget)
    yield '],\n"workspace":{"files":['
    yield from _workspace(conversation, budget)
    totals = {"messages": messages, "files_included": budget.included, "files_omitted": budget.omitted,
              "file_bytes_included": budget.included_bytes}
    yield '},\n"totals":' + _dumps(totals) + "}\n"


