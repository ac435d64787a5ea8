"""Per-account records of one-time notices (SPEC §4: the Codex autoraise notice is shown once)."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class UserNotice(models.Model):
    """A notice ``key`` has been shown to ``user``. Deleting the row shows it again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notices_shown")
    key = models.CharField(max_length=64)
    shown_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="one_notice_per_user_and_key")]

    def __str__(self) -> str:
        return f"{self.key} → {self.user}"
