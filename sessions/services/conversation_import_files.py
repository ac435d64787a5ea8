"""The files of an imported conversation: its attachments' original bytes and its workspace's
files, checked before anything is written, then written, and removed again when the import fails.

Checks (each refusal names the field):
- ``data`` is base64 (or null: the export left the file out, and it is not restored); a file is at
  most ``FILE_MAX_BYTES``, all files together at most ``FILES_MAX_BYTES`` (the export's caps);
  a ``sha256`` given must match the bytes;
- an attachment belongs to a user message of the document; its name is cleaned as an upload's is
  (a name holding a path is refused) and its bytes are checked as an upload's are
  (``attachments.content_checked``: an image is a PNG, JPEG, GIF or WebP that opens, a PDF parses,
  text is UTF-8), so an import never stores what an upload would refuse;
- a workspace path is relative, with ``/`` between parts, no empty, ``.`` or ``..`` part, no
  backslash; no path is both a file and a folder of another.
The workspace and the attachments' folder are new (named by the new conversation's id), so a
failed import removes them whole.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings

from sessions.agent.tools.workspace import workspace_root
from sessions.models import Attachment, Conversation
from sessions.services import attachments
from sessions.services.conversation_export import FILE_MAX_BYTES, FILES_MAX_BYTES
from sessions.services.conversation_import_checks import (
    ImportRefused,
    array,
    field,
    integer,
    join,
    moment,
    obj,
    text,
)
from sessions.services.conversations import workspace_remove

PATH_MAX_CHARS = 1024
PART_MAX_BYTES = 255


@dataclass(frozen=True)
class AttachmentPlan:
    key: int  # the attachment's id in the document
    message: int  # the id of its message in the document
    name: str
    data: bytes
    checked: attachments.Checked
    workspace_name: str
    created_at: datetime | None


@dataclass(frozen=True)
class FilePlan:
    path: str
    data: bytes


class FileBudget:
    """The bytes of every file of the document, against ``FILES_MAX_BYTES``."""

    def __init__(self) -> None:
        self.used = 0
        self.skipped = 0

    def decoded(self, record: dict, path: str) -> bytes | None:
        """The file's bytes (None when the export left them out), its ``sha256`` checked."""
        value = record.get("data")
        if value is None:
            self.skipped += 1
            return None
        where = join(path, "data")
        if not isinstance(value, str):
            raise ImportRefused(where, "must be the file's bytes in base64, or null")
        if len(value) > (FILE_MAX_BYTES + 2) // 3 * 4:
            raise ImportRefused(where, f"the file is larger than the per-file cap of {FILE_MAX_BYTES:,} bytes")
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ImportRefused(where, "is not valid base64") from None
        self.used += len(data)
        if self.used > FILES_MAX_BYTES:
            raise ImportRefused(where, f"the files hold more than the cap of {FILES_MAX_BYTES:,} bytes in all")
        digest = record.get("sha256")
        if digest is not None and hashlib.sha256(data).hexdigest() != str(digest).lower():
            raise ImportRefused(where, "the bytes do not match the sha256 given (the file is damaged)")
        return data


def attachments_checked(raw, *, user_messages: set[int], budget: FileBudget) -> list[AttachmentPlan]:
    plans: list[AttachmentPlan] = []
    seen: set[int] = set()
    for i, item in enumerate(array(raw, "attachments")):
        path = join("attachments", i)
        record = obj(item, path)
        key = integer(field(record, "id", path), join(path, "id"), minimum=1, maximum=2**63 - 1)
        if key in seen:
            raise ImportRefused(join(path, "id"), f"the id {key} is used twice")
        seen.add(key)
        message = integer(field(record, "message", path), join(path, "message"), minimum=1, maximum=2**63 - 1)
        if message not in user_messages:
            raise ImportRefused(join(path, "message"), f"names no user message of the document (id {message})")
        try:
            name = attachments.name_checked(text(field(record, "name", path), join(path, "name"), max_chars=255))
        except attachments.AttachmentRefused as exc:
            raise ImportRefused(join(path, "name"), str(exc)) from None
        workspace_name = text(record.get("workspace_name") or "", join(path, "workspace_name"), max_chars=255)
        created_at = moment(record.get("created_at"), join(path, "created_at"))
        data = budget.decoded(record, path)
        if data is None:
            continue
        declared = text(record.get("media_type") or "", join(path, "media_type"), max_chars=100)
        try:
            checked = attachments.content_checked(data, name, declared)
        except attachments.AttachmentRefused as exc:
            raise ImportRefused(join(path, "data"), str(exc)) from None
        kind = record.get("kind")
        if kind is not None and kind != checked.kind:
            raise ImportRefused(join(path, "kind"), f"the bytes are {checked.kind}, not {str(kind)[:20]}")
        plans.append(AttachmentPlan(key, message, name, data, checked, workspace_name, created_at))
    return plans


def relative_path(value, path: str) -> str:
    raw = text(value, path, max_chars=PATH_MAX_CHARS, empty=False)
    if raw.startswith("/") or "\\" in raw:
        raise ImportRefused(path, f"must be a relative path with / between its parts, not {raw[:80]!r}")
    for part in raw.split("/"):
        if part in ("", ".", ".."):
            raise ImportRefused(path, f"must not hold an empty, . or .. part: {raw[:80]!r}")
        if len(part.encode("utf-8")) > PART_MAX_BYTES:
            raise ImportRefused(path, f"a part of the path is longer than {PART_MAX_BYTES} bytes")
    return raw


def workspace_checked(raw, *, budget: FileBudget) -> list[FilePlan]:
    workspace = obj(raw, "workspace")
    plans: list[FilePlan] = []
    files: set[str] = set()
    folders: set[str] = set()
    for i, item in enumerate(array(field(workspace, "files", "workspace", []), "workspace.files")):
        path = join("workspace.files", i)
        record = obj(item, path)
        relative = relative_path(field(record, "path", path), join(path, "path"))
        parents = {relative.rsplit("/", n)[0] for n in range(1, relative.count("/") + 1)}
        if relative in files or relative in folders or parents & files:
            raise ImportRefused(join(path, "path"), f"{relative[:80]!r} clashes with another path of the workspace")
        files.add(relative)
        folders.update(parents)
        data = budget.decoded(record, path)
        if data is not None:
            plans.append(FilePlan(relative, data))
    return plans


# Writing ---------------------------------------------------------------------------------------------

def _write_new(path: Path, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
        handle.write(data)


def workspace_write(conversation: Conversation, files: list[FilePlan]) -> None:
    """Write the files into the conversation's (new, empty) workspace."""
    if not files:
        return
    root = workspace_root(conversation.workspace)
    for plan in files:
        target = root.joinpath(*plan.path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_new(target, plan.data)


def attachment_stored(conversation: Conversation, plan: AttachmentPlan) -> Attachment:
    """The attachment's row (not saved yet) with its original and thumbnail written."""
    c = plan.checked
    row = Attachment(owner=conversation.owner, conversation=conversation, kind=c.kind, name=plan.name,
                     size=len(plan.data), media_type=c.media_type, width=c.width, height=c.height, pages=c.pages,
                     has_text=c.has_text, sha256=hashlib.sha256(plan.data).hexdigest(),
                     storage=f"{conversation.id}/{secrets.token_hex(16)}", workspace_name=plan.workspace_name)
    if plan.created_at is not None:
        row.created_at = plan.created_at
    row.path.parent.mkdir(parents=True, exist_ok=True)
    _write_new(row.path, plan.data)
    if c.kind == "image":
        _write_new(row.thumbnail_path, attachments._thumbnail(plan.data))
    return row


def files_remove(conversation: Conversation) -> None:
    """Remove what a failed import wrote: the new conversation's workspace and attachments' folder."""
    workspace_remove(Path(conversation.workspace))
    workspace_remove(Path(settings.HERMES_ATTACHMENTS_DIR) / str(conversation.id), root=settings.HERMES_ATTACHMENTS_DIR)
