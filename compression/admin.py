"""Staff administration of the runtime settings, the price table and the audit trail.

- Each settings group is a singleton: its list page opens the one row, it cannot be added twice or
  deleted, and saving goes through ``settings_store.save_group`` (validated, audited, broadcast).
- The auxiliary API key is write-only (see ``AuxiliarySettingsForm``).
- The audit trail is read-only and visible to every staff member.
- "Import config.yaml" / "Export config.yaml" live under the compression settings page and are
  reachable from every settings page; like every admin view they require staff.
"""
from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from compression import settings_store, yaml_io
from compression.core.config import yaml_key
from compression.forms import (
    AgentSettingsForm,
    AuxiliarySettingsForm,
    CompressionSettingsForm,
    ConfigImportForm,
    ContextEngineSettingsForm,
    ModelDefaultsForm,
    PromptCachingSettingsForm,
)
from compression.models import (
    SETTINGS_MODELS,
    AgentSettings,
    AuxiliarySettings,
    CompressionSettings,
    ContextEngineSettings,
    ModelDefaults,
    ModelPrice,
    PromptCachingSettings,
    SettingsChange,
)

APPLY_NOTE = "Saved changes apply to the next turn or compression job; no restart is needed."


def _can_change_all(request) -> bool:
    return all(request.user.has_perm(f"compression.change_{m._meta.model_name}") for m in SETTINGS_MODELS.values())


def _can_view_all(request) -> bool:
    return all(
        request.user.has_perm(f"compression.view_{m._meta.model_name}")
        or request.user.has_perm(f"compression.change_{m._meta.model_name}")
        for m in SETTINGS_MODELS.values()
    )


class SingletonSettingsAdmin(admin.ModelAdmin):
    """One row per group, edited through the shared validator and the settings store."""

    change_form_template = "admin/compression/settings_change_form.html"
    save_as = False

    def has_add_permission(self, request):
        return super().has_add_permission(request) and not self.model.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        obj = self.model.load()
        return HttpResponseRedirect(reverse(f"admin:compression_{self.model._meta.model_name}_change",
                                            args=[obj.pk]))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        if object_id is not None and str(object_id) == str(self.model.SINGLETON_PK):
            self.model.load()  # the one row always exists, even after a database flush
        extra_context = {
            **(extra_context or {}),
            "yaml_import_url": reverse("admin:compression_config_import") if _can_change_all(request) else "",
            "yaml_export_url": reverse("admin:compression_config_export") if _can_view_all(request) else "",
            "settings_note": APPLY_NOTE,
        }
        return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        settings_store.save_group(self.model.group, form.group_values(), user=request.user, source="admin")
        obj.refresh_from_db()


@admin.register(CompressionSettings)
class CompressionSettingsAdmin(SingletonSettingsAdmin):
    form = CompressionSettingsForm
    fieldsets = [
        ("When to compress", {"fields": ["enabled", "threshold", "target_ratio", "hygiene_hard_message_limit",
                                         "max_compression_attempts"], "description": APPLY_NOTE}),
        ("What to keep", {"fields": ["protect_first_n", "protect_last_n"]}),
        ("How to store and fail", {"fields": ["in_place", "on_summary_failure"]}),
        ("Codex routes", {"fields": ["codex_gpt55_autoraise", "codex_gpt55_autoraise_notice",
                                     "codex_app_server_auto"], "classes": ["collapse"]}),
    ]

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("import-config/", view(self.import_config_view), name="compression_config_import"),
            path("export-config/", view(self.export_config_view), name="compression_config_export"),
            *super().get_urls(),
        ]

    def import_config_view(self, request):
        if not _can_change_all(request):
            raise PermissionDenied
        errors: list[tuple[int | None, str]] = []
        if request.method == "POST":
            form = ConfigImportForm(request.POST, request.FILES)
            if form.is_valid():
                dry_run = "_check" in request.POST
                try:
                    result = yaml_io.import_config(form.cleaned_data["yaml_text"], user=request.user,
                                                   source="import", dry_run=dry_run)
                except yaml_io.ConfigImportError as exc:
                    errors = exc.errors
                else:
                    for warning in result.warnings:
                        messages.warning(request, warning)
                    changed = ", ".join(yaml_key(g, n) for g, fields in result.changes.items() for n in fields)
                    verb = "Check passed: would change" if dry_run else "Imported config.yaml: changed"
                    messages.success(request, f"{verb} {result.changed_count} setting(s)"
                                              + (f" ({changed})." if changed else "."))
                    if not dry_run:
                        return HttpResponseRedirect(reverse("admin:compression_compressionsettings_changelist"))
        else:
            form = ConfigImportForm()
        context = {
            **self.admin_site.each_context(request),
            "title": "Import config.yaml",
            "opts": self.model._meta,
            "form": form,
            "import_errors": errors,
            "export_url": reverse("admin:compression_config_export"),
        }
        return TemplateResponse(request, "admin/compression/import_config.html", context)

    def export_config_view(self, request):
        if not _can_view_all(request):
            raise PermissionDenied
        response = HttpResponse(yaml_io.export_config(), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="config.yaml"'
        return response


@admin.register(AuxiliarySettings)
class AuxiliarySettingsAdmin(SingletonSettingsAdmin):
    form = AuxiliarySettingsForm
    fieldsets = [
        (None, {"fields": ["provider", "model", "base_url", "timeout"], "description": APPLY_NOTE}),
        ("Credentials", {"fields": ["api_key", "clear_api_key"]}),
    ]


@admin.register(PromptCachingSettings)
class PromptCachingSettingsAdmin(SingletonSettingsAdmin):
    form = PromptCachingSettingsForm


@admin.register(ContextEngineSettings)
class ContextEngineSettingsAdmin(SingletonSettingsAdmin):
    form = ContextEngineSettingsForm


@admin.register(ModelDefaults)
class ModelDefaultsAdmin(SingletonSettingsAdmin):
    form = ModelDefaultsForm
    fieldsets = [
        (None, {"fields": ["provider", "model", "context_length", "max_tokens"], "description": APPLY_NOTE}),
        ("Custom OpenAI-compatible endpoint", {"fields": ["base_url", "api_key", "clear_api_key"]}),
    ]


@admin.register(AgentSettings)
class AgentSettingsAdmin(SingletonSettingsAdmin):
    form = AgentSettingsForm


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    list_display = ["model", *ModelPrice.PRICE_FIELDS]
    list_editable = list(ModelPrice.PRICE_FIELDS)
    search_fields = ["model"]

    def save_model(self, request, obj, form, change):
        settings_store.save_price(obj, user=request.user, source="admin")

    def delete_model(self, request, obj):
        settings_store.delete_price(obj, user=request.user, source="admin")

    def delete_queryset(self, request, queryset):
        for price in queryset:
            settings_store.delete_price(price, user=request.user, source="admin")


@admin.register(SettingsChange)
class SettingsChangeAdmin(admin.ModelAdmin):
    """Read-only for every staff member; nobody can add, edit or delete history."""

    list_display = ["at", "username", "source", "group", "field", "old_value", "new_value"]
    list_filter = ["group", "source"]
    search_fields = ["field", "username", "group"]
    date_hierarchy = "at"
    readonly_fields = ["at", "username", "source", "group", "field", "old_value", "new_value"]
    fields = readonly_fields

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_staff

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
