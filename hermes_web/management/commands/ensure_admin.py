"""Create an admin login when there is none, and print it once."""
from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create a superuser 'admin' with a random password if no superuser exists, and print the login."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options) -> None:
        User = get_user_model()
        existing = User.objects.filter(is_superuser=True).order_by("id").first()
        if existing is not None:
            name = existing.get_username()
            self.stdout.write(f"Admin account: {name} (its password was printed when it was created; "
                              f"to set a new one: python manage.py changepassword {name})")
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        self.stdout.write(self.style.SUCCESS(f"Admin login created — username: {username}  password: {password}"))
