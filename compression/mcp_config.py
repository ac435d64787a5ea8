"""The configuration of MCP servers (Hermes' ``mcp_servers``): the one validator and the one writer.

``validate_server(name, raw, *, stored=None) -> (values, warnings)`` turns one Hermes-shaped entry
(``command``, ``args``, ``env``, ``url``, ``headers``, ``enabled``, ``timeout``,
``connect_timeout``, ``tools: {include, exclude, resources, prompts}``) into the values of every
configuration field of ``MCPServer`` (``CONFIG_FIELDS``; ``env`` and ``headers`` as dicts). It
raises ``MCPConfigError`` naming every bad key at once. ``errors`` and ``warnings`` are both lists
of ``(key, message)``: the key is dotted inside the entry (``timeout``, ``tools.include``,
``env.API_TOKEN``) and the message reads after it ("must be …"). Unknown keys, ``tools.resources``
and ``tools.prompts`` (not supported here) and keys that do not apply to the transport are
warnings, never silently dropped.

``stored`` resolves the keep placeholder: in ``env`` and ``headers`` a value of exactly ``"***"``
(``KEEP``) keeps the stored value of that key. Pass ``stored_secrets(row)`` (``{}`` for a new
server) to resolve it, and a placeholder with nothing stored is an error naming the key; with
``stored=None`` placeholders are left for ``server_save`` to resolve under its row lock.

Writers (each atomic, each audited as ``SettingsChange`` rows with group ``mcp_servers.<name>``):
- ``server_save(name, values, *, user=None, source="admin", keep_secret_keys=True) -> MCPServer``:
  create or update (``values`` may be a subset of ``CONFIG_FIELDS``; the others keep their stored
  values), re-validated through ``validate_server``; one row per changed field (``env`` and
  ``headers`` as ``SettingsChange.MASK``, never a value), a ``server: created`` row for a new one;
  ``generation`` is raised by 1 when anything changed. ``keep_secret_keys=False`` stores ``"***"``
  literally instead of keeping the stored value.
- ``server_delete(name, *, user=None, source="admin") -> bool``.
- ``server_reload(name, *, user=None, source="admin") -> MCPServer``: raises ``generation``
  (audited as field ``reload``) so the workers reconnect.

The state fields (state, tools, failures, last_error, …) belong to the workers: nothing here
writes them. ``to_hermes(values, mask_secrets=True)`` is the entry as config.yaml writes it,
secret values replaced by ``"***"``; secrets are never logged.
"""
from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction

from compression.models import MCPServer, SettingsChange

log = logging.getLogger(__name__)

MCP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an RFC 7230 token
KEEP = "***"
SECRET_FIELDS = ("env", "headers")
CONFIG_FIELDS = ("transport", "command", "args", "env", "url", "headers", "enabled", "timeout",
                 "connect_timeout", "tools_include", "tools_exclude")
TIMEOUT_MAX, CONNECT_TIMEOUT_MAX = 3600, 600
DEFAULT_TIMEOUT, DEFAULT_CONNECT_TIMEOUT = 120.0, 60.0
MAX_TEXT = 500  # the model's command and url columns
_KEYS = ("command", "args", "env", "url", "headers", "enabled", "timeout", "connect_timeout", "tools")
_STDIO_KEYS, _HTTP_KEYS = ("args", "env"), ("headers",)


class MCPConfigError(ValueError):
    """Invalid server configuration. ``errors``: every ``(key, message)``, the key dotted in the entry."""

    def __init__(self, errors: list[tuple[str, str]]):
        self.errors = errors
        super().__init__("; ".join(f"{key} {message}" for key, message in errors))


# --- Validation ---------------------------------------------------------------------------------


def validate_server(name: Any, raw: Any, *, stored: Mapping[str, Mapping[str, str]] | None = None,
                    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The model field values of one ``mcp_servers`` entry, and its warnings (see the module doc)."""
    errors: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    if not isinstance(name, str) or not MCP_NAME_RE.match(name):
        errors.append(("name", f"must be 1–40 letters, digits, '_' or '-', starting with a letter or digit; "
                               f"got {name!r}"))
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise MCPConfigError([*errors, ("", "must be a mapping of settings (command: or url:, …)")])
    given = {k: v for k, v in raw.items() if v is not None}
    for key in raw:
        if key not in _KEYS:
            warnings.append((str(key), "is not a known key (ignored)"))

    command, url = given.get("command"), given.get("url")
    values: dict[str, Any] = {"command": "", "args": [], "env": {}, "url": "", "headers": {}}
    if command is not None and url is not None:
        errors += [("command", "cannot be given together with url: a server is stdio (command) or HTTP (url)"),
                   ("url", "cannot be given together with command: a server is stdio (command) or HTTP (url)")]
    elif command is None and url is None:
        errors.append(("command", "is needed (the program a stdio server runs), or a url for an HTTP server"))
    elif command is not None:
        values["transport"] = "stdio"
        values["command"] = _text(command, "command", errors)
        values["args"] = _args(given.get("args", []), errors)
        values["env"] = _secret_map(given.get("env", {}), "env", errors, stored)
        warnings += [(key, "applies to HTTP servers only (ignored)") for key in _HTTP_KEYS if key in given]
    else:
        values["transport"] = "http"
        values["url"] = _url(url, errors)
        values["headers"] = _secret_map(given.get("headers", {}), "headers", errors, stored)
        warnings += [(key, "applies to stdio servers only (ignored)") for key in _STDIO_KEYS if key in given]

    enabled = given.get("enabled", True)
    if not isinstance(enabled, bool):
        errors.append(("enabled", f"must be true or false; got {enabled!r}"))
    values["enabled"] = enabled is True
    values["timeout"] = _seconds(given.get("timeout", DEFAULT_TIMEOUT), "timeout", TIMEOUT_MAX, errors)
    values["connect_timeout"] = _seconds(given.get("connect_timeout", DEFAULT_CONNECT_TIMEOUT), "connect_timeout",
                                         CONNECT_TIMEOUT_MAX, errors)
    values["tools_include"], values["tools_exclude"] = _tools(given.get("tools", {}), errors, warnings)
    if errors:
        raise MCPConfigError(errors)
    return values, warnings


def _text(value: Any, key: str, errors: list) -> str:
    if not isinstance(value, str) or not value.strip():
        errors.append((key, f"must be a non-empty string; got {value!r}"))
        return ""
    if "\x00" in value or len(value) > MAX_TEXT:
        errors.append((key, f"must be at most {MAX_TEXT} characters, without NUL"))
        return ""
    return value.strip()


def _args(value: Any, errors: list) -> list[str]:
    if not isinstance(value, list):
        errors.append(("args", f"must be a list of strings, e.g. [mcp-server-time]; got {value!r}"))
        return []
    for i, arg in enumerate(value):
        if not isinstance(arg, str):
            errors.append(("args", f"must be a list of strings: item {i + 1} is {arg!r} (quote it: \"{arg}\")"))
        elif "\x00" in arg:
            errors.append(("args", f"item {i + 1} contains a NUL character"))
    return [a for a in value if isinstance(a, str)]


def _secret_map(value: Any, key: str, errors: list, stored: Mapping[str, Mapping[str, str]] | None) -> dict:
    """env (variable names) or headers (RFC 7230 names, no CR/LF in values); numbers and booleans become text."""
    if not isinstance(value, Mapping):
        errors.append((key, "must be a mapping of names to values"))  # never echo a secret
        return {}
    out: dict[str, str] = {}
    for name, item in value.items():
        path = f"{key}.{name}"
        if key == "env" and not (isinstance(name, str) and ENV_NAME_RE.match(name)):
            errors.append((path, "is not a valid variable name (letters, digits and '_', not starting with a digit)"))
            continue
        if key == "headers" and not (isinstance(name, str) and HEADER_NAME_RE.match(name)):
            errors.append((path, "is not a valid header name (an RFC 7230 token: no spaces, colons or quotes)"))
            continue
        if isinstance(item, bool):
            item = "true" if item else "false"
        elif isinstance(item, (int, float)):
            item = str(item)
        if not isinstance(item, str):
            errors.append((path, "must be a string"))
            continue
        if "\x00" in item or (key == "headers" and ("\r" in item or "\n" in item)):
            errors.append((path, "must not contain " + ("CR, LF or NUL" if key == "headers" else "NUL")))
            continue
        if item == KEEP and stored is not None:
            if name not in stored.get(key, {}):
                errors.append((path, f'is "{KEEP}" (keep the stored value), but no value is stored for it: '
                                     "type the value"))
                continue
            item = stored[key][name]
        out[name] = item
    return out


def _url(value: Any, errors: list) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT or any(c.isspace() or ord(c) < 32 for c in value):
        errors.append(("url", f"must be an http(s) URL of at most {MAX_TEXT} characters, without spaces"))
        return ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        errors.append(("url", f"must be an http:// or https:// URL with a host; got {value!r}"))
        return ""
    return value


def _seconds(value: Any, key: str, maximum: int, errors: list) -> float:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 < value <= maximum:
        errors.append((key, f"must be a number of seconds > 0 and ≤ {maximum}; got {value!r}"))
        return 0.0
    return float(value)


def _tools(value: Any, errors: list, warnings: list) -> tuple[list[str], list[str]]:
    if not isinstance(value, Mapping):
        errors.append(("tools", "must be a mapping (include:, exclude:)"))
        return [], []
    for key in value:
        if key in ("resources", "prompts"):
            warnings.append((f"tools.{key}", "is not supported here (ignored): only the server's tools are offered"))
        elif key not in ("include", "exclude"):
            warnings.append((f"tools.{key}", "is not a known key (ignored)"))
    include = _tool_names(value.get("include"), "tools.include", errors)
    exclude = _tool_names(value.get("exclude"), "tools.exclude", errors)
    both = [t for t in include if t in exclude]
    if both:
        errors.append(("tools.exclude", f"names tools that tools.include names too: {', '.join(both)}"))
    return include, exclude


def _tool_names(value: Any, key: str, errors: list) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        errors.append((key, f"must be a tool name or a list of tool names; got {value!r}"))
        return []
    names: list[str] = []
    for item in (t.strip() for t in items):
        if item and item not in names:
            names.append(item)
    return names


# --- Conversion ---------------------------------------------------------------------------------


def _json_object(text: str, what: str) -> dict[str, str]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        log.error("MCP server %s is not a JSON object; read as empty", what)  # never log the value
        return {}
    return value


def field_values(row: MCPServer) -> dict[str, Any]:
    """The configuration fields of ``row`` (``env`` and ``headers`` as dicts)."""
    values = {name: getattr(row, name) for name in CONFIG_FIELDS}
    for name in SECRET_FIELDS:
        values[name] = _json_object(values[name], f"{row.name}.{name}")
    return values


def stored_secrets(row: MCPServer | None) -> dict[str, dict[str, str]]:
    """What ``validate_server(stored=…)`` needs: the stored env and headers ({} for no server)."""
    if row is None:
        return {}
    values = field_values(row)
    return {name: values[name] for name in SECRET_FIELDS}


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def to_hermes(values: Mapping[str, Any], *, mask_secrets: bool = True) -> dict[str, Any]:
    """An ``mcp_servers`` entry in Hermes' layout: stdio (command, args, env) or HTTP (url, headers),
    then enabled, timeout, connect_timeout, and tools only when include or exclude is non-empty."""
    def secret(mapping: Mapping[str, str]) -> dict[str, str]:
        return {k: KEEP if mask_secrets else v for k, v in sorted(mapping.items())}

    out: dict[str, Any] = {}
    if values.get("command") or (values.get("transport") == "stdio" and not values.get("url")):
        out.update(command=values["command"], args=list(values["args"]), env=secret(values["env"]))
    if values.get("url"):
        out.update(url=values["url"], headers=secret(values["headers"]))
    out.update(enabled=values["enabled"], timeout=_number(values["timeout"]),
               connect_timeout=_number(values["connect_timeout"]))
    tools = {k: list(values[f"tools_{k}"]) for k in ("include", "exclude") if values[f"tools_{k}"]}
    if tools:
        out["tools"] = tools
    return out


def display_value(field: str, value: Any) -> str:
    """How the audit trail shows a value: secrets as the mask (empty stays empty), never a value."""
    if field in SECRET_FIELDS:
        return SettingsChange.MASK if value else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(_number(value))
    if isinstance(value, list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# --- Writing ------------------------------------------------------------------------------------


def _audit(user, source: str, name: str, field: str, old: str, new: str) -> SettingsChange:
    username = user.get_username() if user is not None and hasattr(user, "get_username") else ""
    user_id = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
    return SettingsChange(user_id=user_id, username=username, source=source, group=f"mcp_servers.{name}",
                          field=field, old_value=old, new_value=new)


def server_apply(name: str, values: Mapping[str, Any], *, user=None, source: str = "admin",
                 keep_secret_keys: bool = True) -> tuple[MCPServer, dict[str, tuple[str, str]]]:
    """``server_save``, also returning the changed fields as ``{field: (old, new)}`` (secrets masked)."""
    unknown = set(values) - set(CONFIG_FIELDS)
    if unknown:
        raise ValueError(f"not MCP server configuration fields: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        row = MCPServer.objects.select_for_update().filter(name=name).first()
        created = row is None
        if row is None:
            row = MCPServer(name=name)
        before = field_values(row)
        merged = {**before, **values}
        stored = (stored_secrets(row) if not created else {}) if keep_secret_keys else None
        checked, _ = validate_server(name, to_hermes(merged, mask_secrets=False), stored=stored)
        changed = [f for f in CONFIG_FIELDS if created or checked[f] != before[f]]
        changes = {f: ("" if created else display_value(f, before[f]), display_value(f, checked[f]))
                   for f in changed}
        if not changed:
            return row, changes
        for f in changed:
            value = checked[f]
            setattr(row, f, json.dumps(value, sort_keys=True) if f in SECRET_FIELDS and value else
                    ("" if f in SECRET_FIELDS else value))
        row.generation += 1
        if created:
            row.save()
        else:
            row.save(update_fields=[*changed, "generation"])  # never the workers' state fields
        audit = [_audit(user, source, name, "server", "", "created")] if created else []
        audit += [_audit(user, source, name, f, old, new) for f, (old, new) in changes.items()]
        SettingsChange.objects.bulk_create(audit)
    return row, changes


def server_save(name: str, values: Mapping[str, Any], *, user=None, source: str = "admin",
                keep_secret_keys: bool = True) -> MCPServer:
    """Create or update the server ``name`` with ``values`` (validated, audited; see the module doc)."""
    return server_apply(name, values, user=user, source=source, keep_secret_keys=keep_secret_keys)[0]


def server_delete(name: str, *, user=None, source: str = "admin") -> bool:
    """Delete the server ``name`` (audited: each field's old value, then ``server: deleted``)."""
    with transaction.atomic():
        row = MCPServer.objects.select_for_update().filter(name=name).first()
        if row is None:
            return False
        before = field_values(row)
        audit = [_audit(user, source, name, f, display_value(f, before[f]), "") for f in CONFIG_FIELDS]
        audit.append(_audit(user, source, name, "server", "", "deleted"))
        SettingsChange.objects.bulk_create(audit)
        row.delete()
    return True


def server_reload(name: str, *, user=None, source: str = "admin") -> MCPServer:
    """Raise the server's generation so every worker reconnects to it; audited as field ``reload``."""
    with transaction.atomic():
        row = MCPServer.objects.select_for_update().get(name=name)
        old = row.generation
        row.generation = old + 1
        row.save(update_fields=["generation"])
        _audit(user, source, name, "reload", str(old), str(row.generation)).save()
    return row


__all__ = [
    "CONFIG_FIELDS",
    "KEEP",
    "MCP_NAME_RE",
    "MCPConfigError",
    "display_value",
    "field_values",
    "server_apply",
    "server_delete",
    "server_reload",
    "server_save",
    "stored_secrets",
    "to_hermes",
    "validate_server",
]
