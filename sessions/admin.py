"""Share links and per-user limits in the admin.

- Share links: staff see every link and revoke them (an action, or the revoked time on a link's
  page). Links are made by their owners on the conversation page only: a link added here would
  have no token anyone knows.
- Limits: *Default limits* (one row; its list page opens it) and *Users' limits* (a user's own
  values, each replacing the default when filled). Every value is checked against its range with
  a message naming it, and every change is recorded in the settings audit trail
  (``limits.save``); a saved change applies to the next message.
"""
from __future__ import annotations

from decimal import Decimal

from django import forms
from django.contrib import admin, messages
from django.core.validators import MaxValueValidator
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone

from sessions.models import LimitDefaults, ShareLink, UserLimits
from sessions.models_limits import (
    LIMIT_FIELDS,
    MAX_COST_PER_MONTH,
    MAX_MESSAGES_PER_DAY,
    MAX_MESSAGES_PER_MINUTE,
    MAX_TOKENS_PER_DAY,
    NO_LIMIT_DEFAULT,
    NO_LIMIT_OVERRIDE,
)
from sessions.services import limits
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


# --- Limits ---------------------------------------------------------------------------------------

LIMITS_NOTE = ("Checked before each message is queued; a saved change applies to the next message. Days and months "
               "are UTC calendar ones; tokens and money count every model call of the user's conversations, the "
               "summariser's included. Usage: each user's own page (Usage) and the staff dashboard.")
MAXIMA = {"messages_per_minute": MAX_MESSAGES_PER_MINUTE, "messages_per_day": MAX_MESSAGES_PER_DAY,
          "input_tokens_per_day": MAX_TOKENS_PER_DAY, "output_tokens_per_day": MAX_TOKENS_PER_DAY,
          "cost_per_month": MAX_COST_PER_MONTH}


class LimitsForm(forms.ModelForm):
    """Every limit is optional; a value out of range, or not a number, is refused with a message
    naming the range (as the other settings pages do)."""

    empty = NO_LIMIT_DEFAULT

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, maximum in MAXIMA.items():
            field = self.fields.get(name)
            if field is None:
                continue
            codes: tuple[str, ...]
            if isinstance(maximum, Decimal):
                text = (f"Enter an amount of US dollars from 0 to {maximum:,}, with at most two decimals. "
                        f"{self.empty}")
                codes = ("invalid", "min_value", "max_value", "max_digits", "max_decimal_places", "max_whole_digits")
            else:
                text = f"Enter a whole number from 0 to {maximum:,}. {self.empty}"
                codes = ("invalid", "min_value", "max_value")
            field.required = False
            field.validators.append(MaxValueValidator(maximum))
            field.error_messages.update(dict.fromkeys(codes, text))


class UserLimitsForm(LimitsForm):
    empty = NO_LIMIT_OVERRIDE

    class Meta:
        model = UserLimits
        fields = ["user", *LIMIT_FIELDS]


class LimitDefaultsForm(LimitsForm):
    class Meta:
        model = LimitDefaults
        fields = list(LIMIT_FIELDS)


@admin.register(LimitDefaults)
class LimitDefaultsAdmin(admin.ModelAdmin):
    """One row: the list page opens it; it cannot be added twice or deleted."""

    form = LimitDefaultsForm
    fieldsets = [(None, {"fields": list(LIMIT_FIELDS), "description": LIMITS_NOTE})]
    save_as = False

    def has_add_permission(self, request) -> bool:
        return super().has_add_permission(request) and not LimitDefaults.objects.exists()

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            return super().changelist_view(request, extra_context)  # the admin's own refusal
        row = LimitDefaults.load()
        return HttpResponseRedirect(reverse("admin:agent_sessions_limitdefaults_change", args=[row.pk]))

    def save_model(self, request, obj, form, change):
        limits.limits_save(row=obj, user=request.user)


@admin.register(UserLimits)
class UserLimitsAdmin(admin.ModelAdmin):
    form = UserLimitsForm
    fieldsets = [(None, {"fields": ["user"], "description": LIMITS_NOTE}), ("Limits", {"fields": list(LIMIT_FIELDS)})]
    list_display = ["user", *(f"shown_{name}" for name in LIMIT_FIELDS)]
    list_select_related = ["user"]
    search_fields = ["user__username"]
    autocomplete_fields = ["user"]
    save_as = False

    def get_readonly_fields(self, request, obj=None):
        return ["user"] if obj is not None else []

    def save_model(self, request, obj, form, change):
        limits.limits_save(row=obj, user=request.user)

    def delete_model(self, request, obj):
        limits.limits_delete(row=obj, user=request.user)

    def delete_queryset(self, request, queryset):
        for row in queryset.select_related("user"):
            limits.limits_delete(row=row, user=request.user)


def _shown(name: str):
    def shown(self, row: UserLimits) -> str:
        value = getattr(row, name)
        if value is None:
            return "default"
        if not value:
            return "no limit"
        return limits.dollars(value) if name == "cost_per_month" else f"{value:,}"

    shown.__name__ = f"shown_{name}"
    return admin.display(description=name.replace("_", " "))(shown)


for _name in LIMIT_FIELDS:
    setattr(UserLimitsAdmin, f"shown_{_name}", _shown(_name))
