from django.contrib import admin

from sessions.models import UserNotice


@admin.register(UserNotice)
class UserNoticeAdmin(admin.ModelAdmin):
    """Read-only trail of one-time notices; delete a row to show that notice to the user again."""

    list_display = ("user", "key", "shown_at")
    list_filter = ("key",)
    search_fields = ("user__username", "key")
    readonly_fields = ("user", "key", "shown_at")

    def has_add_permission(self, request) -> bool:
        return False
