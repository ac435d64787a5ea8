"""`manage.py import_config <file>`: load a Hermes-style config.yaml into the settings (all or nothing)."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from compression.core.config import yaml_key
from compression.yaml_io import ConfigImportError, import_config


class Command(BaseCommand):
    help = "Import settings from a Hermes-style config.yaml. Nothing changes if any line is invalid."

    def add_arguments(self, parser):
        parser.add_argument("file", help="path to config.yaml ('-' for standard input)")
        parser.add_argument("--dry-run", action="store_true", help="check and report, change nothing")

    def handle(self, *args, file: str, dry_run: bool, **options):
        try:
            text = self.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
        try:
            result = import_config(text, source="command", dry_run=dry_run)
        except ConfigImportError as exc:
            raise CommandError(f"{file}: nothing imported. " + "; ".join(
                f"line {line}: {msg}" if line else msg for line, msg in exc.errors)) from None
        for warning in result.warnings:
            self.stderr.write(self.style.WARNING(f"warning: {warning}"))
        for group, fields in result.changes.items():
            for name, (old, new) in fields.items():
                self.stdout.write(f"{yaml_key(group, name)}: {old or '(empty)'} → {new or '(empty)'}")
        for server, fields in result.mcp_changes.items():  # secrets arrive already masked
            for name, (old, new) in fields.items():
                self.stdout.write(f"mcp_servers.{server}.{name}: {old or '(empty)'} → {new or '(empty)'}")
        verb = "would change" if dry_run else "changed"
        self.stdout.write(self.style.SUCCESS(f"{verb} {result.changed_count} setting(s), "
                                             f"{len(result.warnings)} warning(s)"))
