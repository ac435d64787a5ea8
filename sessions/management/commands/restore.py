"""`manage.py restore PATH`: put an archive written by `manage.py backup` back into an empty data
folder (HERMES_DATA_DIR), after checking all of it; then `manage.py migrate` brings an older
schema forward. Refused, with nothing changed, when the folder already holds a database or files."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions.services.backup import BackupError, migration_label
from sessions.services.backup_restore import backup_restore


class Command(BaseCommand):
    help = ("Restore a backup written by `manage.py backup` into an empty data folder (the database, the "
            "workspaces, the attachments and the secret key), after checking the whole archive. "
            "Run `manage.py migrate` afterwards.")
    requires_system_checks: list[str] = []  # nothing may touch the database before it is restored

    def add_arguments(self, parser):
        parser.add_argument("path", help="the archive written by `manage.py backup`")

    def handle(self, *args, path: str, **options):
        try:
            restored = backup_restore(source=Path(path))
        except BackupError as exc:
            raise CommandError(f"restore: {exc}") from None
        manifest = restored.manifest
        files = manifest.get("files", {})
        self.stdout.write(self.style.SUCCESS(
            f"restored the backup of {manifest.get('created', '?')}: the database "
            f"({migration_label(restored.applied)}), {files.get('workspaces', 0)} workspace "
            f"file(s), {files.get('attachments', 0)} attachment file(s)"
            + (", the secret key" if files.get("secret_key") else "")))
        if restored.pending:
            self.stdout.write(f"the backup predates {len(restored.pending)} migration(s) of this version: "
                              "run `python manage.py migrate` now")
        else:
            self.stdout.write("next: `python manage.py migrate` (nothing to apply), then start the application")
