"""Share links in the admin: staff see every link and revoke them (an action, or the revoked
time on a link's page). Links are made by their owners on the conversation page only: a link
added here would have no token anyone knows."""
from __future__ import annotations

from django.contrib import admin, messages
from django.utils import timezone

from sessions.models import ShareLink
from sessions.services.share import share_links_revoke


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "created_by", "created_at", "expires_at", "revoked_at", "include_workspace",
                    "active")
    list_filter = ("include_workspace", ("revoked_at", admin.EmptyFieldListFilter))
    list_select_related = ("conversation", "created_by")
    search_fields = ("conversation__title", "created_by__username")
    readonly_fields = ("conversation", "created_by", "token_hash", "created_at", "expires_at", "include_workspace")
    fields = ("conversation", "created_by", "created_at", "expires_at", "include_workspace", "revoked_at", "token_hash")
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.display(boolean=True, description="Active")
    def active(self, link: ShareLink) -> bool:
        return link.is_active(timezone.now())

    @admin.action(description="Revoke the selected share links", permissions=["change"])
    def revoke(self, request, queryset):
        n = share_links_revoke(links=queryset)
        self.message_user(request, f"Revoked {n} share link{'s' if n != 1 else ''}; they answer 404 from now on.",
                          messages.SUCCESS)
