"""Backups of the embedded default (`manage.py backup` / `restore`, sessions/services/backup*.py):
a round trip keeps the database and every file byte for byte; a restore refuses a folder that is
not empty, an archive with a member that climbs out, is absolute or is a link, a damaged database,
a manifest that does not match, and a backup of a newer version, each with nothing changed; a
backup refuses PostgreSQL and a bad path; a write cut off half-way leaves no archive."""
from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sessions.services.backup import DATABASE, FORMAT, MANIFEST, VERSION, BackupError, Layout, backup_write
from sessions.services.backup_restore import backup_restore, code_migrations

ROOT = Path(__file__).resolve().parent.parent.parent
# The migrated test database is the source of a real Hermes Web schema (`hermes_db`).
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="session")
def hermes_db(django_db_setup, django_db_blocker, tmp_path_factory) -> Path:
    """A copy of the migrated test database (a real Hermes Web schema), with a threshold of 0.61."""
    from django.db import connection

    path = tmp_path_factory.mktemp("hermes-db") / DATABASE
    with django_db_blocker.unblock():
        source = sqlite3.connect(connection.settings_dict["NAME"])
        target = sqlite3.connect(path)
        source.backup(target)
        target.execute("PRAGMA journal_mode=DELETE")
        target.execute("UPDATE compression_compressionsettings SET threshold = 0.61")
        target.commit()
        target.close()
        source.close()
    return path


def layout_in(folder: Path) -> Layout:
    return Layout(data_dir=folder, database=folder / DATABASE,
                  folders={"workspaces": folder / "workspaces", "attachments": folder / "attachments"})


@pytest.fixture
def installation(tmp_path, hermes_db) -> Layout:
    """A data folder as a running installation has it: database, secret key, workspaces, attachments."""
    layout = layout_in(tmp_path / "data")
    layout.data_dir.mkdir()
    layout.database.write_bytes(hermes_db.read_bytes())
    layout.secret_key.write_text("k" * 50)
    notes = layout.folders["workspaces"] / "c1" / "notes"
    notes.mkdir(parents=True)
    (notes / "plan.txt").write_text("ship on Friday\n")
    (layout.folders["workspaces"] / "c1" / "empty-folder").mkdir()
    (layout.folders["workspaces"] / "c1" / "escape").symlink_to("/etc/passwd")
    (layout.folders["attachments"] / "c1").mkdir(parents=True)
    (layout.folders["attachments"] / "c1" / "0f3a").write_bytes(bytes(range(256)) * 40)
    return layout


def tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under `folder` -> its bytes (None for a folder)."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


def archive(path: Path, files: dict[str, bytes], *, extra=(), manifest: dict | None = None) -> Path:
    """A hand-made archive: `files` with a manifest that lists them truly, then `extra` TarInfos."""
    members = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()}
    body = {"format": FORMAT, "version": VERSION, "created": "2026-01-01T00:00:00+00:00",
            "database": {"migrations": {}}, "files": {}, "members": members, "skipped": []}
    body.update(manifest or {})
    with tarfile.open(path, "w:gz") as tar:
        for name, data in [*files.items(), (MANIFEST, json.dumps(body).encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def refused(source: Path, layout: Layout, needle: str) -> str:
    """The restore of `source` into `layout` is refused with `needle` in the reason; nothing changed."""
    before = tree(layout.data_dir)
    with pytest.raises(BackupError) as info:
        backup_restore(source=source, layout=layout)
    assert needle in str(info.value), str(info.value)
    assert "Nothing was changed." in str(info.value)
    assert tree(layout.data_dir) == before
    return str(info.value)


def test_it_round_trips_the_database_and_every_file(installation, tmp_path):
    written = backup_write(target=tmp_path / "hermes.tar.gz", layout=installation)
    assert oct(written.path.stat().st_mode & 0o777) == "0o600"  # it holds the secret key and the password hashes
    manifest = written.manifest
    assert (manifest["format"], manifest["version"]) == ("hermes-web-backup", 1)
    assert manifest["files"] == {"workspaces": 1, "attachments": 1, "secret_key": 1}
    assert manifest["database"]["migrations"]["agent_sessions"][0] == "0001_initial"
    assert manifest["skipped"] == ["workspaces/c1/escape (a symbolic link)"]

    target = layout_in(tmp_path / "restored")
    restored = backup_restore(source=written.path, layout=target)
    assert restored.pending == []
    before, after = tree(installation.data_dir), tree(target.data_dir)
    del before[str(Path("workspaces/c1/escape"))]
    assert after.keys() == before.keys()
    assert {k: v for k, v in after.items() if k != DATABASE} == {k: v for k, v in before.items() if k != DATABASE}
    assert not (target.folders["workspaces"] / "c1" / "escape").exists()
    assert (target.folders["workspaces"] / "c1" / "empty-folder").is_dir()
    with sqlite3.connect(target.database) as db:
        assert db.execute("SELECT threshold FROM compression_compressionsettings").fetchone() == (0.61,)
    assert oct(target.database.stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("what", ["database", "file"])
def test_it_refuses_to_restore_into_a_folder_that_is_not_empty(installation, tmp_path, what):
    written = backup_write(target=tmp_path / "hermes.tar.gz", layout=installation)
    target = layout_in(tmp_path / "busy")
    if what == "database":
        target.data_dir.mkdir()
        target.database.write_bytes(b"")
    else:
        (target.folders["workspaces"] / "c9").mkdir(parents=True)
        (target.folders["workspaces"] / "c9" / "draft.md").write_text("mine")
    reason = refused(written.path, target, "already holds a database" if what == "database" else "already holds files")
    assert "empty data folder" in reason


def test_a_folder_with_only_the_generated_secret_key_and_empty_folders_counts_as_empty(installation, tmp_path):
    written = backup_write(target=tmp_path / "hermes.tar.gz", layout=installation)
    target = layout_in(tmp_path / "fresh")
    (target.data_dir / "workspaces").mkdir(parents=True)
    target.secret_key.write_text("generated when the command started")
    backup_restore(source=written.path, layout=target)
    assert target.secret_key.read_text() == "k" * 50  # the installation's own key, which its secrets need


def _member(name: str, kind=tarfile.REGTYPE, data: bytes | None = b"x", linkname: str = ""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    info.size = len(data) if kind == tarfile.REGTYPE and data is not None else 0
    return info, data if kind == tarfile.REGTYPE else None


@pytest.mark.parametrize("member, needle", [
    (_member("../escaped.txt"), "points outside the data folder"),
    (_member("workspaces/c1/../../../escaped.txt"), "points outside the data folder"),
    (_member("/tmp/escaped.txt"), "is an absolute path"),
    (_member("workspaces/c1/link", tarfile.SYMTYPE, linkname="/etc/passwd"), "is a link"),
    (_member("workspaces/c1/hard", tarfile.LNKTYPE, linkname="hermes.sqlite3"), "is a link"),
    (_member("workspaces/c1/pipe", tarfile.FIFOTYPE), "is a special file"),
    (_member("settings.py"), "is not part of a Hermes Web backup"),
], ids=["dot-dot", "dot-dot-inside", "absolute", "symlink", "hardlink", "fifo", "unknown"])
def test_it_refuses_a_member_that_could_write_outside_or_is_not_a_file(hermes_db, tmp_path, member, needle):
    source = archive(tmp_path / "evil.tar.gz", {DATABASE: hermes_db.read_bytes()}, extra=[member])
    target = layout_in(tmp_path / "data")
    refused(source, target, needle)
    assert not (tmp_path / "escaped.txt").exists() and not Path("/tmp/escaped.txt").exists()
    assert not target.database.exists()


def test_it_refuses_a_damaged_database(hermes_db, tmp_path):
    data = bytearray(hermes_db.read_bytes())
    page = 4096
    for number in range(2, len(data) // page):  # every b-tree page's header overwritten
        data[number * page:number * page + 12] = b"\xff" * 12
    refused(archive(tmp_path / "broken.tar.gz", {DATABASE: bytes(data)}), layout_in(tmp_path / "data"),
            "its database is damaged")
    refused(archive(tmp_path / "junk.tar.gz", {DATABASE: b"not a database at all" * 100}),
            layout_in(tmp_path / "data"), "its database is damaged")


def test_it_refuses_a_member_that_does_not_match_its_manifest(hermes_db, tmp_path):
    lying = {"members": {DATABASE: {"bytes": hermes_db.stat().st_size, "sha256": "0" * 64}}}
    refused(archive(tmp_path / "a.tar.gz", {DATABASE: hermes_db.read_bytes()}, manifest=lying),
            layout_in(tmp_path / "data"), "does not match its manifest")
    refused(archive(tmp_path / "b.tar.gz", {DATABASE: hermes_db.read_bytes()}, manifest={"format": "zip"}),
            layout_in(tmp_path / "data"), "does not describe a hermes-web-backup archive")
    (tmp_path / "c.tar.gz").write_bytes(b"\x1f\x8b" + os.urandom(200))
    refused(tmp_path / "c.tar.gz", layout_in(tmp_path / "data"), "cannot be read as a backup archive")


def test_it_refuses_a_backup_of_a_newer_version(installation, tmp_path):
    written = backup_write(target=tmp_path / "hermes.tar.gz", layout=installation)
    older_code = code_migrations() - {("agent_sessions", "0001_initial")}
    target = layout_in(tmp_path / "restored")
    with pytest.raises(BackupError, match="comes from a newer version of Hermes Web .*agent_sessions.0001_initial"):
        backup_restore(source=written.path, layout=target, known_migrations=older_code)
    assert tree(target.data_dir) == {}


@pytest.mark.parametrize("path, needle", [
    ("missing-folder/hermes.tar.gz", "the folder {tmp}/missing-folder does not exist"),
    (".", "give the archive's file name"),
    ("folder", "{tmp}/folder is a folder: give the archive's file name"),
    ("exists.tar.gz", "{tmp}/exists.tar.gz already exists"),
])
def test_the_command_says_what_is_wrong_with_a_bad_path(tmp_path, monkeypatch, path, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "exists.tar.gz").write_text("an older backup")
    (tmp_path / "folder").mkdir()
    with pytest.raises(CommandError) as info:
        call_command("backup", path)
    assert needle.format(tmp=tmp_path) in str(info.value)
    assert (tmp_path / "exists.tar.gz").read_text() == "an older backup"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["exists.tar.gz", "folder"]


def manage(*args: str, env: dict, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, preexec_fn=preexec)


def base_env(data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env["HERMES_DATA_DIR"] = str(data_dir)
    return env


def test_both_commands_refuse_postgresql_and_point_to_the_docs(tmp_path):
    env = {**base_env(tmp_path / "data"), "DATABASE_URL": "postgresql://hermes@127.0.0.1:9/hermes"}
    backup = manage("backup", str(tmp_path / "hermes.tar.gz"), env=env)
    assert backup.returncode == 1, backup.stderr
    assert "DATABASE_URL points at PostgreSQL" in backup.stderr and "pg_dump" in backup.stderr
    assert 'docs/operations.md, section "Backups"' in backup.stderr
    restore = manage("restore", str(tmp_path / "hermes.tar.gz"), env=env)
    assert restore.returncode == 1 and "DATABASE_URL points at PostgreSQL" in restore.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_write_cut_off_half_way_leaves_no_archive(installation, tmp_path):
    """The file system refuses the archive half-way (a file size limit: the write fails with EFBIG,
    as on a full disk): the command fails, saying so, and leaves neither the archive nor its
    temporary files."""
    big = installation.folders["workspaces"] / "c1" / "data.bin"
    big.write_bytes(os.urandom(6 * 1024 * 1024))  # does not compress
    limit = installation.database.stat().st_size + 2 * 1024 * 1024
    out = tmp_path / "out"
    out.mkdir()

    def file_size_limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = manage("backup", str(out / "hermes.tar.gz"), env=base_env(installation.data_dir), preexec=file_size_limit)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "File too large" in result.stderr and "no archive was written" in result.stderr
    assert list(out.iterdir()) == []
    # Without the limit, the same command writes the whole archive.
    result = manage("backup", str(out / "hermes.tar.gz"), env=base_env(installation.data_dir))
    assert result.returncode == 0, result.stderr
    assert "2 workspace file(s), 1 attachment file(s), the secret key" in result.stdout
    assert [p.name for p in out.iterdir()] == ["hermes.tar.gz"]
