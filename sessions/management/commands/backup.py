"""`manage.py backup PATH`: one archive (.tar.gz) of the embedded default's SQLite database, taken
consistently while the web and the workers run, with the workspaces, the attachments and the
development secret key; written under a temporary name and renamed into place when complete.
PostgreSQL is refused: back it up with pg_dump (docs/operations.md, "Backups")."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions.services.attachments import human_size
from sessions.services.backup import BackupError, backup_write, migration_label


class Command(BaseCommand):
    help = ("Write a backup of the embedded SQLite database (a consistent copy, taken while the application "
            "runs), the workspaces, the attachments and the secret key to one .tar.gz archive. "
            "Restore it with `manage.py restore PATH` into an empty data folder.")
    requires_system_checks: list[str] = []  # a backup must work whatever a check says

    def add_arguments(self, parser):
        parser.add_argument("path", help="the archive to write, e.g. backups/hermes-2026-01-31.tar.gz (must not exist)")

    def handle(self, *args, path: str, **options):
        try:
            written = backup_write(target=Path(path))
        except BackupError as exc:
            raise CommandError(f"backup: {exc}") from None
        except OSError as exc:
            raise CommandError(f"backup: writing {path} failed ({exc}); no archive was written") from None
        manifest = written.manifest
        files = manifest["files"]
        self.stdout.write(self.style.SUCCESS(
            f"wrote {written.path} ({human_size(written.size)}): the database "
            f"({human_size(manifest['database']['bytes'])}, {migration_label(manifest['database']['migrations'])}), "
            f"{files['workspaces']} workspace file(s), {files['attachments']} attachment file(s)"
            + (", the secret key" if files["secret_key"] else "")))
        for line in manifest["skipped"]:
            self.stdout.write(f"left out: {line}")
