"""`manage.py import_conversation FILE --user NAME`: import a hermes-web/1 export or an
OpenAI-style messages array as a new conversation of the user NAME, and print its id. The
document is checked in full first: a refusal names the bad field and writes nothing."""
from __future__ import annotations

import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions.services.conversation_import import ImportRefused, import_document


class Command(BaseCommand):
    help = ("Import a conversation (a hermes-web/1 JSON export, or an OpenAI-style messages array) for a user; "
            "prints the new conversation's id. FILE '-' reads standard input.")

    def add_arguments(self, parser):
        parser.add_argument("file", help="the JSON document ('-': standard input)")
        parser.add_argument("--user", required=True, help="the user who will own the conversation (user name)")

    def handle(self, *args, file: str, user: str, **options):
        User = get_user_model()
        owner = User.objects.filter(**{User.USERNAME_FIELD: user}).first()
        if owner is None:
            raise CommandError(f"no user named {user!r}: nothing was imported")
        try:
            if file == "-":
                conversation = import_document(sys.stdin.buffer, owner=owner)
            else:
                with open(file, "rb") as handle:
                    conversation = import_document(handle, owner=owner)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror or exc}") from None
        except ImportRefused as exc:
            raise CommandError(f"refused, nothing was imported: {exc}") from None
        for note in getattr(conversation, "import_notes", ()):
            self.stderr.write(note)
        self.stdout.write(str(conversation.id))
