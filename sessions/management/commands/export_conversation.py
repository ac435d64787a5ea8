"""`manage.py export_conversation ID [--format json|markdown] [--output FILE]`: a conversation's
complete record as JSON (``hermes-web/1``, docs/export-format.md) or as Markdown, to standard
output unless a file is named. An operator's command: any user's conversation, by id."""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from sessions.models import Conversation
from sessions.services.conversation_export import iter_json
from sessions.services.export_markdown import iter_markdown


class Command(BaseCommand):
    help = ("Export a conversation as JSON (format hermes-web/1: messages, sessions, compaction events, settings, "
            "attachments and workspace files; no secrets) or as Markdown, to standard output by default.")

    def add_arguments(self, parser):
        parser.add_argument("id", help="the conversation's id")
        parser.add_argument("--format", choices=("json", "markdown"), default="json")
        parser.add_argument("--output", help="write to this file instead of standard output")

    def handle(self, *args, id: str, format: str, output: str | None, **options):
        try:
            conversation = Conversation.objects.filter(id=uuid.UUID(id)).first()
        except ValueError:
            conversation = None
        if conversation is None:
            raise CommandError(f"no conversation with the id {id!r}")
        chunks = iter_json(conversation) if format == "json" else iter_markdown(conversation)
        if not output or output == "-":
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            return
        target = Path(output)
        partial = target.with_name(f".{target.name}.part")
        try:
            with open(partial, "w", encoding="utf-8") as handle:
                for chunk in chunks:
                    handle.write(chunk)
            os.replace(partial, target)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise CommandError(f"cannot write {output}: {exc}") from None
        self.stdout.write(self.style.SUCCESS(f"wrote {output}"))
