"""Admin forms for the settings groups and the config.yaml import.

Every group form checks its values with the shared core validator (``compression.core.config``), so
a refused value carries the same message, naming the valid range, as the YAML import and the
engine. Choice fields render as a select but accept any text, leaving the verdict (and its message)
to that validator. The model settings are also checked against the catalogue, and the context
engine against the engines this installation has (``compression.model_checks``, the same checks the
config.yaml import runs); the engine is a select of those. API keys are write-only. The terminal is refused where its sandbox
cannot start. MCP servers are checked by ``compression.mcp_config`` (``MCPServerForm``); their
environment and header values are write-only.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import escape

from compression import guards, mcp_config
from compression.core.config import SPECS, ConfigValueError, build_group, group_fields, valid_range
from compression.model_checks import engine_choices, engine_problems, settings_problems
from compression.models import (
    AgentSettings,
    AuxiliarySettings,
    CompressionSettings,
    ContextEngineSettings,
    MCPServer,
    ModelDefaults,
    PromptCachingSettings,
)
from compression.yaml_io import MAX_CONFIG_BYTES


class _ChoiceText(forms.CharField):
    """A select whose options come from the core spec (read on each form build, so registries grow)."""

    def __init__(self, group: str, name: str, **kwargs):
        options = list(SPECS[group][name].choices())
        kwargs.setdefault("widget", forms.Select(choices=[(c, c) for c in options]))
        super().__init__(**kwargs)


class GroupSettingsForm(forms.ModelForm):
    """Base: ``group`` names the settings group; ``clean()`` runs the core validator."""

    group: str = ""
    write_only: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name, spec in SPECS[self.group].items():
            if name in self.fields:
                self.fields[name].required = False  # an empty value gets the validator's message
            if name in self.fields and spec.kind in ("int", "optional_int", "float"):
                # Even text that is not a number gets told the valid range.
                kind = "number" if spec.kind == "float" else "whole number"
                self.fields[name].error_messages["invalid"] = f"Enter a {kind}: {valid_range(self.group, name)}."
            if name in self.fields and spec.kind == "choice":
                old = self.fields[name]
                self.fields[name] = _ChoiceText(self.group, name, required=False, label=old.label,
                                                help_text=old.help_text, initial=old.initial)

    def group_values(self) -> dict[str, Any]:
        """The group's values as the form would save them (fields that failed to parse keep the stored value)."""
        values = {name: getattr(self.instance, name) for name in group_fields(self.group)}
        for name in group_fields(self.group):
            if name in self.cleaned_data and name not in self.write_only:
                values[name] = self.cleaned_data[name]
        return values

    def clean(self):
        cleaned = super().clean()
        try:
            self.config = build_group(self.group, self.group_values())
        except ConfigValueError as exc:
            for error in exc.all:
                target = error.field if error.field in self.fields else None
                if target is None or target not in self.errors:
                    self.add_error(target, error.message)
        if not self.errors:
            _add_problems(self, self.installation_problems(self.group_values()))
        return cleaned

    def installation_problems(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        """What the catalogue and the installed engines rule out (the import runs the same checks)."""
        return settings_problems(self.group, values)


class CompressionSettingsForm(GroupSettingsForm):
    group = "compression"

    class Meta:
        model = CompressionSettings
        fields = list(group_fields("compression"))


class WriteOnlyKeyForm(GroupSettingsForm):
    """The API key is a password input that never renders a value; blank keeps the stored key."""

    write_only = ("api_key",)
    key_use = ""

    api_key = forms.CharField(
        label="API key", required=False, strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_api_key = forms.BooleanField(label="Remove the stored API key", required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        stored = bool(self.instance and self.instance.api_key)
        self.fields["api_key"].help_text = (
            ("A key is stored (never shown). " if stored else "No key stored. ")
            + "Type a new key to replace it; leave blank to keep it. " + self.key_use
        )

    def new_api_key(self) -> str | None:
        """The key to store: "" to remove it, a new key, or None to keep the stored one."""
        if self.cleaned_data.get("clear_api_key"):
            return ""
        return self.cleaned_data.get("api_key") or None

    def group_values(self) -> dict[str, Any]:
        values = super().group_values()
        if hasattr(self, "cleaned_data"):
            new_key = self.new_api_key()
            if new_key is not None:
                values["api_key"] = new_key
        return values

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("clear_api_key") and cleaned.get("api_key"):
            self.add_error("api_key", "Either type a new key or tick “remove”, not both.")
        return cleaned


def _add_problems(form: GroupSettingsForm, problems) -> None:
    for name, message in problems:
        target = name if name in form.fields else None
        if target is None or target not in form.errors:
            form.add_error(target, message)


class AuxiliarySettingsForm(WriteOnlyKeyForm):
    group = "auxiliary"
    key_use = "Used with a custom base URL; otherwise the provider's environment variable applies."

    class Meta:
        model = AuxiliarySettings
        fields = [f for f in group_fields("auxiliary") if f != "api_key"]



class PromptCachingSettingsForm(GroupSettingsForm):
    group = "caching"

    class Meta:
        model = PromptCachingSettings
        fields = list(group_fields("caching"))


class ContextEngineSettingsForm(GroupSettingsForm):
    """The engine is a select of the engines this installation has; ``engines.failed`` names the
    plugins that did not load (the page lists them with their error)."""

    group = "context"

    class Meta:
        model = ContextEngineSettings
        fields = list(group_fields("context"))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.engines = engine_choices()
        options = [(name, name) for name in self.engines.names]
        stored = getattr(self.instance, "engine", "")
        if stored and stored not in self.engines.names:  # say what the stored value does today
            options.append((stored, f"{stored} (not available: the built-in compressor runs instead)"))
        self.fields["engine"].widget = forms.Select(choices=options)
        self.fields["engine"].help_text = ("The engines this installation has: the built-in compressor and lcm, "
                                           "the plugins in plugins/context_engine/ that load, and engines "
                                           "registered in code.")

    def installation_problems(self, values: dict[str, Any]) -> list[tuple[str, str]]:
        return engine_problems(values, self.engines)


class ModelDefaultsForm(WriteOnlyKeyForm):
    """Checked against the model catalogue too: an unknown name needs its window, and no window
    under the minimum (a setting that would make every new conversation fail)."""

    group = "model"
    key_use = "Used by the custom route (the base URL above)."

    class Meta:
        model = ModelDefaults
        fields = [f for f in group_fields("model") if f != "api_key"]



class AgentSettingsForm(GroupSettingsForm):
    """Refuses to switch the terminal on where its sandbox cannot start (it never runs unsandboxed)."""

    group = "agent"

    class Meta:
        model = AgentSettings
        fields = list(group_fields("agent"))

    def clean(self):
        cleaned = super().clean()
        config = getattr(self, "config", None)
        if config is not None and config.terminal_enabled:
            reason = guards.terminal_sandbox_problem(network=config.terminal_network)
            if reason:
                self.add_error("terminal_enabled", f"The terminal cannot be enabled: its sandbox cannot start on "
                                                   f"this server ({reason}). Commands never run unsandboxed.")
        return cleaned


class ConfigImportForm(forms.Form):
    """Upload a config.yaml or paste its text."""

    file = forms.FileField(required=False, label="config.yaml file")
    text = forms.CharField(required=False, label="…or paste its contents",
                           widget=forms.Textarea(attrs={"rows": 16, "cols": 80, "spellcheck": "false"}))

    MAX_BYTES = MAX_CONFIG_BYTES  # the import's own cap, for an upload and pasted text alike

    def clean(self):
        cleaned = super().clean()
        upload, text = cleaned.get("file"), cleaned.get("text")
        if upload and text:
            raise forms.ValidationError("Upload a file or paste text, not both.")
        if upload:
            if upload.size > self.MAX_BYTES:
                raise forms.ValidationError(f"The file is larger than {self.MAX_BYTES // 1024} KB.")
            try:
                cleaned["yaml_text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError:
                raise forms.ValidationError("The file is not UTF-8 text.") from None
        elif text:
            if len(text.encode("utf-8")) > self.MAX_BYTES:
                raise forms.ValidationError(f"The pasted text is larger than {self.MAX_BYTES // 1024} KB.")
            cleaned["yaml_text"] = text
        else:
            raise forms.ValidationError("Choose a config.yaml file or paste its contents.")
        return cleaned


# --- MCP servers ----------------------------------------------------------------------------------


class _WriteOnlyTextarea(forms.Textarea):
    """Renders empty, always: neither the stored secrets nor text just typed ever go back into a page."""

    def format_value(self, value):
        return None


def _secret_area() -> forms.CharField:
    return forms.CharField(required=False, strip=False, widget=_WriteOnlyTextarea(
        attrs={"rows": 3, "cols": 60, "autocomplete": "off", "spellcheck": "false"}))


def _tool_list(text: str) -> list[str]:
    return [t.strip() for line in (text or "").splitlines() for t in line.split(",") if t.strip()]


class MCPServerForm(forms.ModelForm):
    """An MCP server: checked by ``mcp_config.validate_server`` (errors land on their field) and
    saved by the admin through ``mcp_config.server_save``. ``env`` and ``headers`` are write-only:
    blank keeps the stored values, typed text replaces them all (``NAME=***`` keeps one stored
    value), “remove all” clears them. After ``is_valid()``, ``mcp_values`` and ``mcp_warnings``
    hold the validator's result."""

    args = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "cols": 60, "spellcheck": "false"}),
                           help_text="One argument per line, e.g. <code>mcp-server-time</code>.")
    env = _secret_area()
    clear_env = forms.BooleanField(label="Remove all stored variables", required=False)
    headers = _secret_area()
    clear_headers = forms.BooleanField(label="Remove all stored headers", required=False)
    include = forms.CharField(label="Include tools", required=False, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text="Offer only these tools, comma or newline separated (empty: all of them).")
    exclude = forms.CharField(label="Exclude tools", required=False, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text="Never offer these tools, comma or newline separated.")

    # The write-only fields: field → (separator in a line, what a line looks like, what they are)
    SECRETS = {"env": ("=", "NAME=value", "variables"), "headers": (":", "Name: value", "headers")}
    KEEP_EXAMPLE = {"env": f"NAME={mcp_config.KEEP}", "headers": f"Name: {mcp_config.KEEP}"}

    class Meta:
        model = MCPServer
        fields = ["name", "command", "url", "enabled", "timeout", "connect_timeout"]
        # Declared above as text; the admin must not copy that text onto the model fields.
        exclude = ["args", "env", "headers", "tools_include", "tools_exclude"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = mcp_config.stored_secrets(self.instance if self.instance.pk else None)
        self.mcp_values: dict[str, Any] = {}
        self.mcp_warnings: list[tuple[str, str]] = []
        for name, maximum in (("timeout", mcp_config.TIMEOUT_MAX), ("connect_timeout", mcp_config.CONNECT_TIMEOUT_MAX)):
            if name in self.fields:
                self.fields[name].required = False  # blank: the default
                self.fields[name].error_messages["invalid"] = f"Enter a number of seconds > 0 and ≤ {maximum}."
        if "name" in self.fields:
            self.fields["name"].help_text = ("1–40 letters, digits, '_' or '-'; the tools are offered as "
                                             "mcp_&lt;name&gt;_&lt;tool&gt;. It cannot be changed later.")
        if "command" in self.fields:
            self.fields["command"].help_text = "stdio: the program to start, e.g. <code>uvx</code>. Fill it or the URL."
        if "url" in self.fields:
            self.fields["url"].help_text = "HTTP: the MCP endpoint, e.g. <code>https://mcp.example.com/mcp</code>."
        for name, (_, shape, noun) in self.SECRETS.items():
            names = sorted(self.stored.get(name, {}))
            held = (f"Stored {noun}: {escape(', '.join(names))} (values are never shown). " if names
                    else f"No {noun} stored. ")
            self.fields[name].label = "Environment" if name == "env" else "Headers"
            self.fields[name].help_text = (held + f"One <code>{shape}</code> per line. Leave blank to keep the stored "
                                           f"{noun}; typing replaces all of them, and <code>{self.KEEP_EXAMPLE[name]}"
                                           "</code> keeps one stored value.")
        if self.instance.pk:
            self.initial.setdefault("args", "\n".join(self.instance.args or []))
            self.initial.setdefault("include", "\n".join(self.instance.tools_include or []))
            self.initial.setdefault("exclude", "\n".join(self.instance.tools_exclude or []))

    def _pairs(self, name: str) -> dict[str, str] | None:
        """The typed NAME=value lines, {} for “remove all”, or None to keep what is stored."""
        sep, shape, noun = self.SECRETS[name]
        text, clear = self.cleaned_data.get(name) or "", self.cleaned_data.get(f"clear_{name}")
        if clear and text.strip():
            self.add_error(name, f"Either type new {noun} or tick “remove all”, not both.")
        if clear or not text.strip():
            return {} if clear else None
        pairs: dict[str, str] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            key, found, value = line.partition(sep)
            if not found or not key.strip():
                # Never echo the line: it may hold a secret.
                self.add_error(name, f"Line {number} is not of the form {shape}.")
            elif key.strip() in pairs:
                self.add_error(name, f"{key.strip()} is given twice.")
            else:
                pairs[key.strip()] = value.strip()
        return pairs

    def clean(self):
        cleaned = super().clean()
        data = self.cleaned_data
        name = self.instance.name if self.instance.pk else data.get("name", "")
        raw: dict[str, Any] = {}
        for key in ("command", "url"):
            if (data.get(key) or "").strip():
                raw[key] = data[key].strip()
        args = [line.strip() for line in (data.get("args") or "").splitlines() if line.strip()]
        if "command" in raw or args:
            raw["args"] = args
        for key in self.SECRETS:
            typed = self._pairs(key)
            applies = ("command" if key == "env" else "url") in raw
            if typed is not None:
                raw[key] = typed
            elif applies and self.stored.get(key):
                raw[key] = dict(self.stored[key])  # blank: keep
        raw["enabled"] = bool(data.get("enabled"))
        for key in ("timeout", "connect_timeout"):
            if data.get(key) is not None:
                raw[key] = data[key]
        raw["tools"] = {"include": _tool_list(data.get("include", "")), "exclude": _tool_list(data.get("exclude", ""))}
        try:
            self.mcp_values, self.mcp_warnings = mcp_config.validate_server(name, raw, stored=self.stored)
        except mcp_config.MCPConfigError as exc:
            for key, message in exc.errors:
                self._add_mcp_error(key, message)
        return cleaned

    def _add_mcp_error(self, key: str, message: str) -> None:
        head, _, rest = key.partition(".")
        target = {"tools": "include" if rest != "exclude" else "exclude"}.get(head, head)
        if head == "name" and "name" in self.errors:
            return  # the field's own message already says what is wrong
        text = f"{rest} {message}" if head in self.SECRETS and rest else f"{key or 'This server'} {message}"
        self.add_error(target if target in self.fields else None, text)
