"""Staff administration of the runtime settings, the price table and the audit trail.

- Each settings group is a singleton: its list page opens the one row, it cannot be added twice or
  deleted, and saving goes through ``settings_store.save_group`` (validated, audited, broadcast).
- The auxiliary API key is write-only (see ``AuxiliarySettingsForm``). The auxiliary page's *Test
  connection* button (a CSRF-protected POST to ``admin:compression_auxiliarysettings_test``, change
  permission) makes one tiny call with the values in the form, the stored key when the key field is
  blank, and shows the answer or the error on the page with the form as typed; nothing is saved.
- The context engine page names the plugins that failed to load, with their error.
- The audit trail is read-only and visible to every staff member.
- "Import config.yaml" / "Export config.yaml" live under the compression settings page and are
  reachable from every settings page; like every admin view they require staff.
- MCP servers (``MCPServerAdmin``) are validated, saved and deleted through ``compression.mcp_config``
  (audited; every change raises the server's generation so the workers reconnect). Their environment
  and header values are write-only. The change page shows the state the workers wrote, read-only,
  and a Reload button: a CSRF-protected POST to ``admin:compression_mcpserver_reload`` (change
  permission), also offered as the list action "Reload selected servers".
"""
from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.text import Truncator

from compression import mcp_config, model_checks, settings_store, yaml_io
from compression.core.config import yaml_key
from compression.forms import (
    AgentSettingsForm,
    AuxiliarySettingsForm,
    CompressionSettingsForm,
    ConfigImportForm,
    ContextEngineSettingsForm,
    MCPServerForm,
    ModelDefaultsForm,
    PromptCachingSettingsForm,
)
from compression.models import (
    SETTINGS_MODELS,
    AgentSettings,
    AuxiliarySettings,
    CompressionSettings,
    ContextEngineSettings,
    MCPServer,
    ModelDefaults,
    ModelPrice,
    PromptCachingSettings,
    SettingsChange,
)

APPLY_NOTE = "Saved changes apply to the next turn or compression job; no restart is needed."
MCP_APPLY_NOTE = ("Fill in a command (a stdio server the worker starts) or a URL (an HTTP server). A saved change "
                  "or Reload makes the workers reconnect before their next turn; no restart is needed. "
                  "Environment and header values are never shown again.")


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
        ("When the cache is cold", {"fields": ["idle_compaction", "idle_compaction_share", "idle_compaction_when",
                                            "defer_horizon_turns"]}),
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
                    changed = ", ".join([*(yaml_key(g, n) for g, fields in result.changes.items() for n in fields),
                                         *(f"mcp_servers.{s}.{n}" for s, fields in result.mcp_changes.items()
                                           for n in fields)])
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
    change_form_template = "admin/compression/auxiliarysettings_change_form.html"
    fieldsets = [
        (None, {"fields": ["provider", "model", "base_url", "timeout"], "description": APPLY_NOTE}),
        ("Credentials", {"fields": ["api_key", "clear_api_key"]}),
    ]

    def get_urls(self):
        test = path("<path:object_id>/test-connection/", self.admin_site.admin_view(self.test_connection_view),
                    name="compression_auxiliarysettings_test")
        return [test, *super().get_urls()]

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        can_test = object_id is not None and self.has_change_permission(request)
        extra_context = {**(extra_context or {}), "test_connection_url": (
            reverse("admin:compression_auxiliarysettings_test", args=[object_id]) if can_test else "")}
        return super().changeform_view(request, object_id, form_url, extra_context)

    def test_connection_view(self, request, object_id):
        """Run the connection test on the posted values, then show the change page with the form as
        typed (bound, so the key field stays empty) and the result; the admin saves nothing."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.model.load()
        if str(object_id) != str(obj.pk):
            raise Http404
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        form = self.get_form(request, obj, change=True)(request.POST, instance=obj)
        result = None
        if form.is_valid():
            result = model_checks.auxiliary_connection_test(form.group_values(),
                                                            main=settings_store.current().model)
        request.hermes_test_only = True  # read by get_form: this POST renders, it never saves
        change_url = reverse("admin:compression_auxiliarysettings_change", args=[obj.pk])
        return self.changeform_view(request, str(obj.pk), change_url,
                                    {"connection_test": result, "connection_test_refused": result is None})

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if getattr(request, "hermes_test_only", False):
            return type(form.__name__, (form,), {"is_valid": _render_only})
        return form


def _render_only(form) -> bool:
    """``is_valid`` of a form the admin must render and never save (its errors still show)."""
    _ = form.errors  # cleans the form once, as is_valid would
    return False


@admin.register(PromptCachingSettings)
class PromptCachingSettingsAdmin(SingletonSettingsAdmin):
    form = PromptCachingSettingsForm


@admin.register(ContextEngineSettings)
class ContextEngineSettingsAdmin(SingletonSettingsAdmin):
    """The engine select and the plugins that failed to load come from the form (``engines``)."""

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


@admin.register(MCPServer)
class MCPServerAdmin(admin.ModelAdmin):
    """Staff with the usual model permissions; writes go through ``mcp_config`` (validated, audited)."""

    form = MCPServerForm
    change_form_template = "admin/compression/mcpserver_change_form.html"
    change_list_template = "admin/compression/mcpserver_change_list.html"
    list_display = ["name", "transport", "enabled", "state", "tool_count", "short_error"]
    list_filter = ["transport", "enabled", "state"]
    search_fields = ["name"]
    actions = ["reload_selected"]
    save_as = False
    STATE = ["transport", "state", "tool_count", "tool_names", "last_error", "latency", "checked_at", "generation_info"]

    def get_fieldsets(self, request, obj=None):
        if obj is not None and not self.has_change_permission(request, obj):
            # View only: every field is shown read-only, so the secrets show as their names alone.
            return [(None, {"fields": ["name", "enabled", "command", "args", "env_names", "url", "header_names",
                                       "timeout", "connect_timeout", "tools_include", "tools_exclude"]}),
                    ("State (written by the workers)", {"fields": self.STATE})]
        fieldsets = [
            (None, {"fields": ["name", "enabled"], "description": MCP_APPLY_NOTE}),
            ("stdio: a command the worker starts", {"fields": ["command", "args", "env", "clear_env"]}),
            ("HTTP: a URL", {"fields": ["url", "headers", "clear_headers"]}),
            ("Limits and tools", {"fields": ["timeout", "connect_timeout", "include", "exclude"]}),
        ]
        if obj is not None:
            fieldsets.append(("State (written by the workers)", {"fields": self.STATE}))
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        return ["name", "env_names", "header_names", *self.STATE] if obj is not None else []

    @admin.display(description="tools")
    def tool_count(self, obj):
        return len(obj.tools or [])

    @admin.display(description="tool names")
    def tool_names(self, obj):
        return ", ".join(str(t.get("name")) for t in obj.tools or [] if isinstance(t, dict)) or "—"

    @admin.display(description="last error")
    def short_error(self, obj):
        return Truncator(obj.last_error).chars(80)

    @admin.display(description="last call latency")
    def latency(self, obj):
        return "—" if obj.last_latency_ms is None else f"{obj.last_latency_ms:,.0f} ms"

    @admin.display(description="generation")
    def generation_info(self, obj):
        if obj.state_generation == obj.generation:
            return str(obj.generation)
        return f"{obj.generation} (the state describes {obj.state_generation}: the workers have not reconnected yet)"

    @admin.display(description="environment")
    def env_names(self, obj):
        return ", ".join(sorted(mcp_config.stored_secrets(obj).get("env", {}))) or "—"

    @admin.display(description="headers")
    def header_names(self, obj):
        return ", ".join(sorted(mcp_config.stored_secrets(obj).get("headers", {}))) or "—"

    def get_urls(self):
        reload_url = path("<path:object_id>/reload/", self.admin_site.admin_view(self.reload_view),
                          name="compression_mcpserver_reload")
        return [reload_url, *super().get_urls()]

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        obj = self.get_object(request, unquote(object_id)) if object_id else None
        extra_context = {
            **(extra_context or {}),
            "reload_url": (reverse("admin:compression_mcpserver_reload", args=[obj.pk])
                           if obj is not None and self.has_change_permission(request, obj) else ""),
            **_yaml_links(request),
        }
        return super().changeform_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {**(extra_context or {}), **_yaml_links(request)})

    def reload_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        row = mcp_config.server_reload(obj.name, user=request.user, source="admin")
        self.message_user(request, f"Reloading {row.name} (generation {row.generation}): the workers reconnect to it "
                                   "before their next turn.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:compression_mcpserver_change", args=[obj.pk]))

    @admin.action(description="Reload selected servers", permissions=["change"])
    def reload_selected(self, request, queryset):
        names = [mcp_config.server_reload(s.name, user=request.user, source="admin").name for s in queryset]
        self.message_user(request, f"Reloading {len(names)} server(s): {', '.join(names)}. The workers reconnect "
                                   "before their next turn.", messages.SUCCESS)

    def save_model(self, request, obj, form, change):
        row = mcp_config.server_save(obj.name, form.mcp_values, user=request.user, source="admin")
        obj.pk, obj._state.adding = row.pk, False
        obj.refresh_from_db()
        for key, message in form.mcp_warnings:
            messages.warning(request, f"{key} {message}")

    def delete_model(self, request, obj):
        mcp_config.server_delete(obj.name, user=request.user, source="admin")

    def delete_queryset(self, request, queryset):
        for server in queryset:
            mcp_config.server_delete(server.name, user=request.user, source="admin")


def _yaml_links(request) -> dict[str, str]:
    return {"yaml_import_url": reverse("admin:compression_config_import") if _can_change_all(request) else "",
            "yaml_export_url": reverse("admin:compression_config_export") if _can_view_all(request) else "",
            "settings_note": MCP_APPLY_NOTE}
