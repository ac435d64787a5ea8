"""`manage.py export_config [file]`: write the current settings as config.yaml (no secrets)."""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from compression.yaml_io import export_config


class Command(BaseCommand):
    help = ("Export the settings as a Hermes-style config.yaml (to standard output without a file). "
            "Secrets are left out.")

    def add_arguments(self, parser):
        parser.add_argument("file", nargs="?", help="where to write (default: standard output)")

    def handle(self, *args, file: str | None, **options):
        text = export_config()
        if not file or file == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(file).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {file}: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"wrote {file}"))
