"""Read-only share links to a conversation.

- ``share_link_create`` makes a link for the owner: a token of 32 random bytes
  (``secrets.token_urlsafe``, 43 characters, 256 bits) that goes into the URL and is returned
  once; only its SHA-256 is stored, so whoever reads the table cannot open a link, and the owner
  must copy the URL when it is shown. An expiry is optional (1, 7 or 30 days).
- ``share_link_get`` finds the active link a token opens: an unknown, revoked or expired token
  all give None, so a visitor cannot tell them apart.
- ``share_link_revoke`` is the owner's; revoking twice changes nothing.
- What a link shows goes through it alone: ``shared_attachment`` only serves attachments sent in
  the shared conversation's messages, and ``workspace_files`` / ``workspace_file_open`` only that
  conversation's workspace, only when the link includes it, only regular files reached without
  a symlink or a climb out of the folder.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sessions.models import Attachment, Conversation, ShareLink

TOKEN_BYTES = 32
TOKEN_CHARS = 43  # len(secrets.token_urlsafe(32))
# The expiry choices of the panel: value, label, lifetime (None: never expires).
EXPIRY_CHOICES = [("never", "Never", None), ("1d", "1 day", timedelta(days=1)),
                  ("7d", "7 days", timedelta(days=7)), ("30d", "30 days", timedelta(days=30))]
WORKSPACE_LIST_LIMIT = 500
STAFF_LIST_LIMIT = 200


class ShareRefused(Exception):
    """The request cannot be done; the text says why."""


class ShareMissing(ShareRefused):
    """No such conversation or link of this user (the caller answers 404)."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _active(now) -> Q:
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))


@transaction.atomic
def share_link_create(*, user, conversation_id, expires: str = "never", include_workspace: bool = False,
                      now=None) -> tuple[ShareLink, str]:
    """A new link to the user's conversation and its token (shown to the owner once, never stored)."""
    conversation = Conversation.objects.filter(id=conversation_id, owner=user).first()
    if conversation is None:
        raise ShareMissing("No such conversation.")
    lifetime = next((life for value, _, life in EXPIRY_CHOICES if value == expires), False)
    if lifetime is False:
        raise ShareRefused("Choose when the link expires: never, in 1 day, 7 days or 30 days.")
    now = now or timezone.now()
    token = secrets.token_urlsafe(TOKEN_BYTES)
    link = ShareLink.objects.create(conversation=conversation, created_by=user, token_hash=token_hash(token),
                                    created_at=now, expires_at=now + lifetime if lifetime else None,
                                    include_workspace=bool(include_workspace))
    return link, token


def share_link_revoke(*, user, conversation_id, link_id: int, now=None) -> ShareLink:
    """Revoke one of the user's links to ``conversation_id``; its URL answers 404 from now on."""
    link = ShareLink.objects.filter(id=link_id, conversation_id=conversation_id,
                                    conversation__owner=user).first()
    if link is None:
        raise ShareMissing("No such link.")
    if link.revoked_at is None:
        link.revoked_at = now or timezone.now()
        link.save(update_fields=["revoked_at"])
    return link


def share_links_revoke(*, links, now=None) -> int:
    """Revoke the active ones of ``links`` (a queryset; the admin's action). How many were."""
    return links.filter(revoked_at__isnull=True).update(revoked_at=now or timezone.now())


def share_link_get(*, token: str, now=None) -> ShareLink | None:
    """The active link ``token`` opens, with its conversation; None for anything else (a
    deactivated owner's links included: they open again if the account is reactivated)."""
    if not isinstance(token, str) or len(token) != TOKEN_CHARS:
        return None
    now = now or timezone.now()
    return (ShareLink.objects.filter(_active(now), token_hash=token_hash(token), conversation__owner__is_active=True)
            .select_related("conversation").first())


def share_links_of(*, user, conversation: Conversation, now=None) -> list[ShareLink]:
    """The active links to the user's conversation, newest first."""
    now = now or timezone.now()
    return list(ShareLink.objects.filter(_active(now), conversation=conversation, conversation__owner=user))


def share_links_active(*, now=None, limit: int = STAFF_LIST_LIMIT) -> list[ShareLink]:
    """Every user's active links, newest first, with their conversation and creator (staff)."""
    now = now or timezone.now()
    return list(ShareLink.objects.filter(_active(now)).select_related("conversation", "created_by")[:limit])


def shared_attachment(*, link: ShareLink, attachment_id: int) -> Attachment | None:
    """An attachment of a message of the shared conversation (never one still pending in the
    composer, never another conversation's)."""
    return Attachment.objects.filter(id=attachment_id, conversation_id=link.conversation_id, message__isnull=False,
                                     message__visible=True).first()


# The workspace ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SharedFile:
    name: str  # relative to the workspace, with "/" between folders
    size: int


def _workspace(link: ShareLink) -> Path | None:
    """The real path of the shared conversation's workspace, or None when the link does not
    include it or there is none (nothing is created for a visitor)."""
    if not link.include_workspace:
        return None
    folder = Path(link.conversation.workspace)
    if folder.is_symlink() or not folder.is_dir():
        return None
    return Path(os.path.realpath(folder))


def workspace_files(*, link: ShareLink, limit: int = WORKSPACE_LIST_LIMIT) -> tuple[list[SharedFile], bool]:
    """The regular files of the shared workspace, by name (at most ``limit``), and whether there
    were more. Symlinks, files and folders alike, are left out: they may lead out of it."""
    root = _workspace(link)
    if root is None:
        return [], False
    found: list[SharedFile] = []
    more = False
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            if len(found) >= limit:
                more = True
                break
            found.append(SharedFile(path.relative_to(root).as_posix(), info.st_size))
        if more:
            break
    found.sort(key=lambda f: f.name)
    return found, more


def workspace_file_open(*, link: ShareLink, name: str):
    """An open binary handle on the shared workspace's file ``name`` (as ``workspace_files``
    lists it), or None: when the link does not include the workspace, the name is absolute,
    climbs out, passes through a symlink, or names anything but a regular file."""
    root = _workspace(link)
    if root is None or not name or "\0" in name or "\\" in name or name.startswith("/"):
        return None
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    path = root.joinpath(*parts)
    if os.path.realpath(path) != str(path):  # a symlink on the way
        return None
    try:
        # O_NONBLOCK: opening a FIFO someone left there must not hang the request.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")
