"""Restore an archive written by `sessions.services.backup` into an empty data folder.

Nothing in the data folder changes unless the whole archive passes:
- the folder must be empty: no database file (nor its -wal, -shm or -journal) and no file at all
  apart from the `secret_key` the settings write when a command starts;
- every member is a regular file or a folder under a name a backup holds (`manifest.json`,
  `hermes.sqlite3`, `secret_key`, `workspaces/…`, `attachments/…`): absolute names, `..`, links and
  special files are refused;
- the manifest names this format and a version this code reads, and lists exactly the files the
  archive holds, each with the size and SHA-256 found;
- the database opens, passes `PRAGMA integrity_check`, and has applied no migration this code
  does not know (a backup of a newer version is refused; one of an older schema is restored and
  `manage.py migrate` brings it forward).
The archive is unpacked into a hidden folder inside the data folder, checked there, and only then
moved into place (renames on one file system); on any failure the hidden folder is removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sessions.services.backup import (
    CHUNK,
    DATABASE,
    FOLDERS,
    FORMAT,
    MANIFEST,
    SECRET_KEY,
    VERSION,
    BackupError,
    Layout,
    readonly_uri,
    sqlite_applied_migrations,
    sqlite_problem,
)

STAGING_PREFIX = ".restore-"
MANIFEST_MAX_BYTES = 256 * 1024 * 1024
NOTHING_CHANGED = "Nothing was changed."


@dataclass
class Restored:
    manifest: dict
    applied: set[tuple[str, str]]
    pending: list[tuple[str, str]]  # migrations of this code the backup's database has not applied


def folder_contents(layout: Layout) -> list[Path]:
    """What makes the data folder non-empty: the database, and any file or link in it apart from
    the generated secret key (and a restore's own hidden folder)."""
    found = {Path(f"{layout.database}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")}
    found = {p for p in found if p.exists() or p.is_symlink()}
    for top in {layout.data_dir, *layout.folders.values()}:
        if not top.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            here = Path(dirpath)
            dirnames[:] = [d for d in dirnames if not (here == layout.data_dir and d.startswith(STAGING_PREFIX))]
            found.update(here / d for d in dirnames if (here / d).is_symlink())
            found.update(here / f for f in filenames if here / f != layout.secret_key)
    return sorted(found)


def _refuse_unless_empty(layout: Layout) -> None:
    found = folder_contents(layout)
    if not found:
        return
    what = "a database" if any(str(p).startswith(str(layout.database)) for p in found) else "files"
    examples = ", ".join(str(p) for p in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    raise BackupError(f"the data folder {layout.data_dir} already holds {what} ({examples}). A backup is restored "
                      f"into an empty data folder only: point HERMES_DATA_DIR at a new folder, or move these away "
                      f"first. {NOTHING_CHANGED}")


def member_name(member: tarfile.TarInfo) -> str:
    """The member's name, normalised, when a backup may hold it; otherwise refused."""
    name = member.name
    if member.issym() or member.islnk():
        raise BackupError(f"the member {name!r} is a link; a backup holds none")
    if not (member.isreg() or member.isdir()):
        raise BackupError(f"the member {name!r} is a special file; a backup holds none")
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith(("/", "\\")):
        raise BackupError(f"the member {name!r} is an absolute path")
    if ".." in path.parts or "\\" in name:
        raise BackupError(f"the member {name!r} points outside the data folder")
    parts = path.parts
    if not parts:
        raise BackupError("a member has an empty name")
    normalised = "/".join(parts)
    if member.isreg() and (normalised in (MANIFEST, DATABASE, SECRET_KEY) or (parts[0] in FOLDERS and len(parts) > 1)):
        return normalised
    if member.isdir() and parts[0] in FOLDERS:
        return normalised
    raise BackupError(f"the member {name!r} is not part of a Hermes Web backup")


def _copy_out(source, dest: Path, mode: int) -> dict:
    digest, size = hashlib.sha256(), 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)
    return {"bytes": size, "sha256": digest.hexdigest()}


def _unpack(source: Path, staging: Path) -> tuple[bytes | None, dict[str, dict]]:
    """Stream every member into `staging` (names checked first); the manifest's bytes and what
    each file turned out to be."""
    found: dict[str, dict] = {}
    folders: set[str] = set()
    manifest = None
    try:
        with tarfile.open(source, mode="r|*") as tar:
            for member in tar:
                name = member_name(member)
                if name in found or name in folders or (name == MANIFEST and manifest is not None):
                    raise BackupError(f"the member {name!r} appears twice")
                handle = tar.extractfile(member) if member.isreg() else None
                if handle is None:
                    folders.add(name)
                    (staging / name).mkdir(parents=True, exist_ok=True)
                elif name == MANIFEST:
                    manifest = handle.read(MANIFEST_MAX_BYTES + 1)
                else:
                    private = name in (DATABASE, SECRET_KEY)
                    found[name] = _copy_out(handle, staging / name, 0o600 if private else (member.mode & 0o777) or 0o600)
    except BackupError:
        raise
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise BackupError(f"{source} cannot be read as a backup archive (a .tar.gz written by "
                          f"`manage.py backup`): {exc}") from None
    return manifest, found


def _manifest_checked(raw: bytes | None, found: dict[str, dict]) -> dict:
    if raw is None:
        raise BackupError(f"the archive has no {MANIFEST}: it was not written by `manage.py backup`")
    if len(raw) > MANIFEST_MAX_BYTES:
        raise BackupError(f"its {MANIFEST} is too large to be a manifest")
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BackupError(f"its {MANIFEST} is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"its {MANIFEST} does not describe a {FORMAT} archive")
    version = manifest.get("version")
    if version != VERSION:
        raise BackupError(f"it is format version {version!r}; this version of Hermes Web reads version {VERSION}")
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise BackupError(f"its {MANIFEST} lists no members")
    if missing := sorted(set(listed) - set(found)):
        raise BackupError(f"it is incomplete: {len(missing)} file(s) its manifest lists are missing "
                          f"(first: {missing[0]!r})")
    if unlisted := sorted(set(found) - set(listed)):
        raise BackupError(f"it holds file(s) its manifest does not list (first: {unlisted[0]!r})")
    for name, seen in found.items():
        expected = listed[name]
        if not isinstance(expected, dict) or (expected.get("bytes"), expected.get("sha256")) != (seen["bytes"], seen["sha256"]):
            raise BackupError(f"the member {name!r} does not match its manifest (size or SHA-256): it is damaged")
    if DATABASE not in found:
        raise BackupError(f"it holds no database ({DATABASE})")
    return manifest


def code_migrations() -> set[tuple[str, str]]:
    """Every migration this code has, read from disk (no database needed)."""
    from django.db.migrations.loader import MigrationLoader

    return set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)


def _database_checked(path: Path, known: set[tuple[str, str]]) -> set[tuple[str, str]]:
    import sqlite3

    if problem := sqlite_problem(path):
        raise BackupError(f"its database is damaged: {problem}")
    connection = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        applied = {(app, name) for app, names in sqlite_applied_migrations(connection).items() for name in names}
    finally:
        connection.close()
    if not applied:
        raise BackupError("its database has no applied migrations: it is not a Hermes Web database")
    if newer := sorted(applied - known):
        raise BackupError(f"it comes from a newer version of Hermes Web (migrations this version does not have: "
                          f"{', '.join('.'.join(m) for m in newer[:3])}); restore it with that version")
    return applied


def _remove_empty_tree(folder: Path) -> None:
    """rmdir an empty folder tree (refused by the system if a file appeared meanwhile)."""
    if not folder.exists():
        return
    for dirpath, _dirnames, _files in os.walk(folder, topdown=False):
        os.rmdir(dirpath)


def _move_into_place(staging: Path, layout: Layout) -> None:
    moves = [(staging / DATABASE, layout.database)]
    if (staging / SECRET_KEY).exists():
        moves.append((staging / SECRET_KEY, layout.secret_key))
    moves += [(staging / root, folder) for root, folder in layout.folders.items() if (staging / root).exists()]
    done: list[tuple[Path, Path]] = []
    previous_key = staging / f"{SECRET_KEY}.before"
    try:
        for src, dst in moves:
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst == layout.secret_key and dst.exists():
                os.replace(dst, previous_key)
            elif src.is_dir():
                _remove_empty_tree(dst)
            shutil.move(src, dst)
            done.append((src, dst))
    except OSError as exc:
        for src, dst in reversed(done):
            shutil.move(dst, src)
        if previous_key.exists():
            os.replace(previous_key, layout.secret_key)
        raise BackupError(f"moving the restored files into place failed ({exc}); {NOTHING_CHANGED}") from None


def backup_restore(*, source: Path, layout: Layout | None = None,
                   known_migrations: set[tuple[str, str]] | None = None) -> Restored:
    """Restore the archive at `source` into the (empty) data folder; see the module's docstring."""
    layout = layout or Layout.from_settings()
    source = Path(source).expanduser()
    if not source.is_file():
        raise BackupError(f"there is no archive at {source}")
    _refuse_unless_empty(layout)
    known = code_migrations() if known_migrations is None else known_migrations
    created = not layout.data_dir.exists()
    layout.data_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=layout.data_dir, prefix=STAGING_PREFIX))
    done = False
    try:
        try:
            raw, found = _unpack(source, staging)
            manifest = _manifest_checked(raw, found)
            applied = _database_checked(staging / DATABASE, known)
        except BackupError as exc:
            raise BackupError(f"{source} was refused: {exc}. {NOTHING_CHANGED}") from None
        _refuse_unless_empty(layout)  # nothing arrived while the archive was checked
        _move_into_place(staging, layout)
        done = True
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not done and not any(layout.data_dir.iterdir()):
            layout.data_dir.rmdir()
    return Restored(manifest=manifest, applied=applied, pending=sorted(known - applied))
