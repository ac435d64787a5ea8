"""Backups of the embedded default: the SQLite database and the data folder's files, in one archive.

`backup_write` writes a gzip-compressed tar holding:
- `hermes.sqlite3`: a consistent copy of the database taken with SQLite's online backup API while
  the web and the workers keep writing (one step under one read transaction, so it is the
  database as it stood at one moment), in rollback-journal mode and checked with
  `PRAGMA integrity_check` before it is archived;
- `secret_key`: the development secret key the settings keep in the data folder (the settings
  secrets and the sessions are keyed from it), when it is there;
- `workspaces/…` and `attachments/…`: every regular file of the conversations' workspaces and of the
  stored attachments (symbolic links and special files are left out and named in the manifest);
- `manifest.json`, last: the format and its version, when it was made, the migrations the copied
  database has applied, file counts, and each member's size and SHA-256.

The database is copied first and the files after it, so every file a copied row names is already
in the folder when the files are read. The archive is written under a temporary name next to the
target and renamed into place only when complete: the target never holds half an archive.
`sessions.services.backup_restore` reads it back. PostgreSQL is backed up with its own tools
(docs/operations.md, "Backups").
"""
from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import sqlite3
import stat as stat_kinds
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings

FORMAT = "hermes-web-backup"
VERSION = 1
MANIFEST = "manifest.json"
DATABASE = "hermes.sqlite3"
SECRET_KEY = "secret_key"
FOLDERS = ("workspaces", "attachments")
SPOOL_BYTES = 16 * 1024 * 1024  # a file larger than this is copied through a temporary file, not memory
CHUNK = 1024 * 1024
DOCS = "docs/operations.md, section \"Backups\""


class BackupError(Exception):
    """The backup or the restore cannot go on; the message says why, in words for the operator."""


@dataclass(frozen=True)
class Layout:
    """Where an installation keeps what a backup holds."""

    data_dir: Path
    database: Path
    folders: dict[str, Path] = field(default_factory=dict)

    @property
    def secret_key(self) -> Path:
        return self.data_dir / SECRET_KEY

    @classmethod
    def from_settings(cls) -> Layout:
        """The running installation's layout; refused unless its database is SQLite."""
        db = settings.DATABASES["default"]
        if not db["ENGINE"].endswith("sqlite3"):
            vendor = db["ENGINE"].rsplit(".", 1)[-1]
            raise BackupError(
                f"DATABASE_URL points at {'PostgreSQL' if 'postgres' in vendor else vendor}: this command copies "
                f"the embedded SQLite database only. Back that database up with its own tools (pg_dump) and copy "
                f"the workspaces and attachments folders; see {DOCS}.")
        return cls(data_dir=Path(settings.DATA_DIR), database=Path(db["NAME"]),
                   folders={"workspaces": Path(settings.HERMES_WORKSPACES_DIR),
                            "attachments": Path(settings.HERMES_ATTACHMENTS_DIR)})


@dataclass
class Written:
    """What `backup_write` put in the archive (its manifest, as stored)."""

    path: Path
    manifest: dict

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def sqlite_applied_migrations(connection: sqlite3.Connection) -> dict[str, list[str]]:
    """app label -> the names of its applied migrations, in the order they were applied."""
    applied: dict[str, list[str]] = {}
    try:
        rows = connection.execute("SELECT app, name FROM django_migrations ORDER BY id").fetchall()
    except sqlite3.DatabaseError:
        return applied
    for app, name in rows:
        applied.setdefault(app, []).append(name)
    return applied


def readonly_uri(path: Path) -> str:
    return Path(path).absolute().as_uri() + "?mode=ro"


def sqlite_problem(path: Path) -> str | None:
    """None when the file opens as an SQLite database and passes `PRAGMA integrity_check`."""
    try:
        connection = sqlite3.connect(readonly_uri(path), uri=True)
    except sqlite3.Error as exc:
        return f"it does not open ({exc})"
    try:
        rows = connection.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.DatabaseError as exc:
        return f"it is not a usable SQLite database ({exc})"
    finally:
        connection.close()
    if [tuple(r) for r in rows] != [("ok",)]:
        found = "; ".join(str(r[0]) for r in rows[:3])
        return f"PRAGMA integrity_check found damage: {found}"
    return None


def _snapshot(database: Path, copy: Path) -> dict:
    """Copy the live database to `copy` in one backup step; its size, hash and migrations."""
    if not database.is_file():
        raise BackupError(f"there is no database at {database}: nothing to back up (has `manage.py migrate` run?)")
    source = sqlite3.connect(database, timeout=30)
    target = sqlite3.connect(copy)
    try:
        source.backup(target)  # pages=-1: every page in one step, a single read transaction
        target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
        migrations = sqlite_applied_migrations(target)
    except sqlite3.Error as exc:
        raise BackupError(f"copying the database {database} failed: {exc}") from None
    finally:
        target.close()
        source.close()
    if problem := sqlite_problem(copy):
        raise BackupError(f"the copy of the database failed its check: {problem}")
    if not migrations:
        raise BackupError(f"{database} holds no applied migrations: it is not a Hermes Web database")
    return {"file": DATABASE, "bytes": copy.stat().st_size, "sha256": _file_sha256(copy),
            "migrations": migrations}


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _add_file(tar: tarfile.TarFile, name: str, path: Path, members: dict) -> bool:
    """Add one regular file as it is now (read once, so a file written meanwhile is archived
    whole at one length); False when it is gone, a link or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # NONBLOCK: a FIFO does not hang
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):  # gone, a symbolic link, a socket
            return False
        raise
    with os.fdopen(fd, "rb") as handle:
        stat = os.fstat(handle.fileno())
        if not stat_kinds.S_ISREG(stat.st_mode):
            return False
        digest = hashlib.sha256()
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
                spool.write(chunk)
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = spool.tell(), int(stat.st_mtime), stat.st_mode & 0o777
            spool.seek(0)
            tar.addfile(info, spool)
    members[name] = {"bytes": info.size, "sha256": digest.hexdigest()}
    return True


def _add_folder(tar: tarfile.TarFile, root: str, folder: Path, members: dict, skipped: list[str],
                exclude: Path) -> int:
    """Every directory and regular file under `folder`, as `root/...`; the number of files."""
    count = 0
    if not folder.is_dir():
        return 0
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        relative = here.relative_to(folder).as_posix()
        prefix = root if relative == "." else f"{root}/{relative}"
        kept = []
        for name in sorted(dirnames):
            try:
                stat = (here / name).lstat()
            except FileNotFoundError:
                continue  # removed since the folder was listed (a deleted conversation)
            if here / name == exclude:
                continue
            if stat_kinds.S_ISLNK(stat.st_mode):
                skipped.append(f"{prefix}/{name} (a symbolic link)")
                continue
            info = tarfile.TarInfo(f"{prefix}/{name}")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(stat.st_mtime)
            tar.addfile(info)
            kept.append(name)
        dirnames[:] = kept
        for name in sorted(filenames):
            member = f"{prefix}/{name}"
            if _add_file(tar, member, here / name, members):
                count += 1
            elif (here / name).is_symlink():
                skipped.append(f"{member} (a symbolic link)")
            elif (here / name).exists():
                skipped.append(f"{member} (not a regular file)")
    return count


def target_checked(path: Path) -> Path:
    """The archive's path, refused with a clear reason before anything is copied."""
    if str(path).strip() in ("", "."):
        raise BackupError("give the archive's file name, e.g. backups/hermes-2026-01-31.tar.gz")
    path = path.expanduser().absolute()
    if path.is_dir():
        raise BackupError(f"{path} is a folder: give the archive's file name, e.g. {path / 'hermes-backup.tar.gz'}")
    if path.exists() or path.is_symlink():
        raise BackupError(f"{path} already exists: give a new name (a backup never overwrites a file)")
    parent = path.parent
    if not parent.is_dir():
        raise BackupError(f"cannot write {path}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BackupError(f"cannot write {path}: the folder {parent} is not writable")
    return path


def backup_write(*, target: Path, layout: Layout | None = None) -> Written:
    """Write the archive to `target` (refused when it exists); see the module's docstring."""
    layout = layout or Layout.from_settings()
    target = target_checked(Path(target))
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as staging_name:
        staging = Path(staging_name)
        database = _snapshot(layout.database, staging / DATABASE)
        members: dict[str, dict] = {DATABASE: {"bytes": database["bytes"], "sha256": database["sha256"]}}
        skipped: list[str] = []
        counts: dict[str, int] = {}
        partial = staging / "archive.tar.gz"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT) as tar:
                tar.add(staging / DATABASE, arcname=DATABASE, recursive=False)
                if layout.secret_key.is_file() and not layout.secret_key.is_symlink():
                    _add_file(tar, SECRET_KEY, layout.secret_key, members)
                for root, folder in layout.folders.items():
                    counts[root] = _add_folder(tar, root, folder, members, skipped, exclude=staging)
                manifest = {
                    "format": FORMAT, "version": VERSION,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                    "database": database,
                    "files": {**counts, SECRET_KEY: int(SECRET_KEY in members)},
                    "bytes": sum(m["bytes"] for m in members.values()),
                    "members": members, "skipped": skipped,
                }
                body = json.dumps(manifest, indent=1, sort_keys=True).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mode, info.mtime = len(body), 0o600, int(time.time())
                tar.addfile(info, io.BytesIO(body))
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, target)
    _fsync_folder(target.parent)
    return Written(path=target, manifest=manifest)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def migration_label(migrations: dict[str, list[str]] | set[tuple[str, str]]) -> str:
    """"52 migrations applied (agent_sessions 0012_sharelink, compression 0010_…)" for the messages."""
    if isinstance(migrations, set):
        grouped: dict[str, list[str]] = {}
        for app, name in sorted(migrations):
            grouped.setdefault(app, []).append(name)
        migrations = grouped
    total = sum(len(names) for names in migrations.values())
    last = ", ".join(f"{app} {names[-1]}" for app, names in sorted(migrations.items())
                     if app in ("agent_sessions", "compression") and names)
    return f"{total} migrations applied" + (f" ({last})" if last else "")
