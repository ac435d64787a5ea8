"""The admin of login throttling: axes' access-attempt list with a column saying which pairs are
locked now and an Unlock action.

axes registers its own admin for AccessAttempt; its locked-out column only works with a fixed
failure limit, and ours is read from HERMES_LOGIN_FAILURES on every attempt, so the registration is
replaced by one that reads the same setting. The access log and the failure log are off
(settings.py), so their always-empty pages are taken out.
"""
from __future__ import annotations

import axes.admin  # noqa: F401  (registers axes' models first, so they can be replaced here)
from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt, AccessFailureLog, AccessLog
from axes.utils import reset
from django.contrib import admin, messages
from django.utils import timezone

from hermes_web.login_throttle import failure_limit, retry_at


class ThrottledAttemptAdmin(AccessAttemptAdmin):
    """Access attempts, newest first, with "Locked until" and the Unlock action."""

    actions = ["unlock"]
    ordering = ["-attempt_time"]

    def get_list_display(self, request):
        return [*super().get_list_display(request), "locked_until"]

    @admin.display(description="Locked until")
    def locked_until(self, attempt: AccessAttempt):
        """When the pair's lock ends, or a dash when the pair is not locked now."""
        failures = sum(AccessAttempt.objects.filter(
            username=attempt.username, ip_address=attempt.ip_address).values_list("failures_since_start", flat=True))
        until = retry_at(attempt.username, attempt.ip_address)
        if failures < failure_limit() or until is None or until <= timezone.now():
            return "—"
        return timezone.localtime(until).strftime("%Y-%m-%d %H:%M %Z")

    @admin.action(description="Unlock the selected username and address pairs", permissions=["delete"])
    def unlock(self, request, queryset):
        """Forget the failures of each selected username and address pair (axes' reset), so they
        may log in again at once."""
        pairs = set(queryset.values_list("username", "ip_address"))
        for username, ip_address in pairs:
            reset(ip=ip_address, username=username)
        self.message_user(request, f"Unlocked {len(pairs)} username and address pair(s).", messages.SUCCESS)


for model in (AccessAttempt, AccessLog, AccessFailureLog):
    if admin.site.is_registered(model):
        admin.site.unregister(model)
admin.site.register(AccessAttempt, ThrottledAttemptAdmin)
