"""Import and export the settings as a Hermes-style ``config.yaml`` (SPEC §9).

Layout (Hermes Agent's config.yaml): ``compression.*``, ``auxiliary.compression.*``, ``prompt_caching.*``
(``cache_ttl``, ``strategy``), ``context.*`` (``engine``, ``recall_tools``), ``model.*`` and ``agent.*``.

Guarantees:
- An import is all or nothing: a YAML syntax error or any invalid value changes nothing, and the
  error names the line (the YAML mark for syntax, the key's node for a value).
- Only keys present in the file change; the others keep their stored values.
- Unknown keys are never dropped silently: each is returned as a warning (with its line).
- Hostile text is refused quickly, naming the line: YAML aliases (``*name``: each one can multiply
  the document, an "alias bomb"), nesting deeper than ``MAX_DEPTH``, more than ``MAX_NODES`` keys
  and values, and a value YAML cannot read (a number of thousands of digits). All but the last are
  screened on the parser's events before any node is built; text over ``MAX_CONFIG_BYTES`` (256 KB,
  the admin's cap) is refused before it is parsed at all.
- ``compression.threshold_percent`` is an alias of ``threshold``. Hermes uses a fraction (0.8 = 80 %);
  a value above 1 and at most 100 is read as a percentage (80 → 0.80) and a warning says so.
- Hermes's older ``compression.abort_on_summary_failure`` (true → abort, false → fallback),
  ``model.default`` and a plain ``model: <name>`` are understood too.
- Secrets are never exported. An ``auxiliary.compression.api_key`` in an imported file is stored
  (masked in the audit trail), and an export followed by an import leaves the stored key alone.
- Like the admin form, an import cannot switch the terminal on where its sandbox cannot start, and
  every group it touches gets the forms' own checks (``model_checks.settings_problems``: the main
  model against the catalogue, the auxiliary model against its route's, the context engine among
  those installed), naming the line of the refused key.
- ``mcp_servers`` (Hermes' layout: ``<name>: {command, args, env}`` or ``{url, headers}``, then
  ``enabled``, ``timeout``, ``connect_timeout``, ``tools: {include, exclude}``) is checked by
  ``compression.mcp_config.validate_server`` and written by its ``server_apply`` in the same
  transaction as the settings: an invalid server refuses the whole file, naming the key's line.
  Servers named in the file are created or updated (their keys not in the file take the defaults);
  servers not named are left alone. Their changes are in ``ImportResult.mcp_changes``.
- MCP ``env`` and ``headers`` values are secrets: the export writes each one as ``"***"``, and on
  import a value of exactly ``"***"`` keeps the stored value of that key (an error naming the key
  when none is stored), so an export followed by an import changes nothing.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.db import transaction

from compression import guards, mcp_config, model_checks, settings_store
from compression.core.config import (
    YAML_SECTIONS,
    ConfigValueError,
    RuntimeConfig,
    config_values,
    group_fields,
    is_secret,
)
from compression.models import MCPServer

_SECTION_TO_GROUP = {path: group for group, path in YAML_SECTIONS.items()}
# Aliases: (section path, key) → (group, field).
_ALIASES = {
    (("compression",), "threshold_percent"): ("compression", "threshold"),
    (("compression",), "abort_on_summary_failure"): ("compression", "on_summary_failure"),
    (("model",), "default"): ("model", "model"),
}
EXPORT_ORDER = ("model", "agent", "context", "compression", "auxiliary", "caching")
MAX_CONFIG_BYTES = 256 * 1024
# A config.yaml nests 3 levels; far deeper input only exhausts PyYAML's recursive composer.
MAX_DEPTH = 32
# A full Hermes config.yaml holds a few hundred keys and values. Building a node costs tens of
# microseconds in the web process, so 256 KB of them (a list of 100,000 numbers) held it for seconds.
MAX_NODES = 10_000
_INT_TAG = "tag:yaml.org,2002:int"
# libyaml when the PyYAML wheel carries it (it does on the common platforms): the same events,
# nodes and marks, 10-20x faster than the pure-Python parser.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
_OPEN_EVENTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class ConfigImportError(ValueError):
    """A file that cannot be imported. ``errors`` is a list of (line or None, message)."""

    def __init__(self, errors: list[tuple[int | None, str]]):
        self.errors = errors
        super().__init__("; ".join(_at(line, msg) for line, msg in errors))

    @property
    def line(self) -> int | None:
        return self.errors[0][0] if self.errors else None


def _at(line: int | None, message: str) -> str:
    return f"line {line}: {message}" if line else message


@dataclass
class ParsedConfig:
    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    lines: dict[tuple[str, str], int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    mcp: dict[str, Any] = field(default_factory=dict)  # server name → its raw entry
    mcp_lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (name, dotted key or "") → line


@dataclass
class ImportResult:
    changes: dict[str, dict[str, tuple[str, str]]]
    warnings: list[str]
    config: RuntimeConfig
    mcp_changes: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)  # server → field → (old, new)

    @property
    def changed_count(self) -> int:
        return sum(len(fields) for fields in (*self.changes.values(), *self.mcp_changes.values()))


# --- Parsing ------------------------------------------------------------------------------------


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _UnreadableValue(yaml.constructor.ConstructorError):
    """A well-formed scalar whose value Python cannot build."""


class _ConfigLoader(_BaseLoader):
    """The safe loader, naming the line of a value it cannot build."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except ValueError as exc:  # int() past sys.get_int_max_str_digits(), a date like 2024-02-30
            if node.tag == _INT_TAG:
                problem = f"a whole number of more than {sys.get_int_max_str_digits()} digits cannot be read"
            else:
                problem = f"the value cannot be read ({exc})"
            raise _UnreadableValue(None, None, problem, node.start_mark) from None


def _screen(text: str) -> None:
    """Refuse, from the parser's events alone, a document that is costly to build: aliases, deep
    nesting, too many values. Syntax errors surface here as ``yaml.MarkedYAMLError``."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_BaseLoader):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent):
            raise ConfigImportError([(line, f"YAML aliases (*{event.anchor}) are not accepted in config.yaml: "
                                            "write the value out")])
        if isinstance(event, _NODE_EVENTS):
            nodes += 1
            if nodes > MAX_NODES:
                raise ConfigImportError([(line, f"the YAML holds more than {MAX_NODES:,} keys and values")])
        if isinstance(event, _OPEN_EVENTS):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigImportError([(line, f"the YAML is nested more than {MAX_DEPTH} levels deep")])
        elif isinstance(event, _CLOSE_EVENTS):
            depth -= 1


def _compose(text: str) -> tuple[yaml.Node | None, Any]:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate, e.g. undecodable bytes read with surrogateescape
        raise ConfigImportError([(None, "the file is not UTF-8 text")]) from None
    if size > MAX_CONFIG_BYTES:
        raise ConfigImportError([(None, f"the file is larger than {MAX_CONFIG_BYTES // 1024} KB")])
    loader = _ConfigLoader(text)
    try:
        _screen(text)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        return node, data
    except _UnreadableValue as exc:
        raise ConfigImportError([(exc.problem_mark.line + 1, exc.problem)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise ConfigImportError([(mark.line + 1 if mark else None, f"YAML syntax error: {problem}")]) from None
    except yaml.YAMLError as exc:
        raise ConfigImportError([(None, f"YAML error: {exc}")]) from None
    finally:
        loader.dispose()


def _mapping_items(node: yaml.MappingNode, path: str, errors: list) -> list[tuple[str, yaml.Node, int]]:
    """(key, value node, line) of a mapping, refusing duplicate and non-text keys."""
    items, seen = [], {}
    for key_node, value_node in node.value:
        line = _line(key_node)
        if not isinstance(key_node, yaml.ScalarNode):
            errors.append((line, f"{path or 'top level'}: keys must be plain names"))
            continue
        key = key_node.value
        dotted = f"{path}.{key}" if path else key
        if key in seen:
            errors.append((line, f"{dotted} is given twice (first on line {seen[key]})"))
            continue
        seen[key] = line
        items.append((key, value_node, line))
    return items


def parse_config_yaml(text: str) -> ParsedConfig:
    """Read a Hermes-style config.yaml into ``{group: {field: raw value}}`` with each key's line.

    Raises ``ConfigImportError`` for syntax errors and structural problems; values are checked later
    by the core validator. Unknown keys become warnings.
    """
    node, _ = _compose(text)
    parsed = ParsedConfig()
    if node is None:
        parsed.warnings.append("the file is empty: nothing to import")
        return parsed
    if not isinstance(node, yaml.MappingNode):
        raise ConfigImportError([(_line(node), "the top level must be a mapping of sections "
                                               "(compression:, model:, …)")])
    errors: list[tuple[int | None, str]] = []
    constructor = _ConfigLoader("")

    def value_of(value_node: yaml.Node) -> Any:
        return constructor.construct_object(value_node, deep=True)

    def walk(mapping: yaml.MappingNode, path: tuple[str, ...]) -> None:
        dotted_path = ".".join(path)
        for key, value_node, line in _mapping_items(mapping, dotted_path, errors):
            sub = (*path, key)
            dotted = ".".join(sub)
            if sub == ("mcp_servers",):
                _walk_mcp(value_node, line, parsed, errors, value_of)
                continue
            group = _SECTION_TO_GROUP.get(path)
            if group is not None:
                target = _ALIASES.get((path, key)) or ((group, key) if key in group_fields(group) else None)
                if target is None:
                    parsed.warnings.append(_at(line, f"unknown key {dotted} (ignored)"))
                    continue
                _take(parsed, errors, target, value_of(value_node), line, dotted)
                continue
            if any(p[: len(sub)] == sub for p in _SECTION_TO_GROUP):  # a section, or a parent of one
                if sub == ("model",) and isinstance(value_node, yaml.ScalarNode):
                    _take(parsed, errors, ("model", "model"), value_of(value_node), line, dotted)
                elif isinstance(value_node, yaml.MappingNode):
                    walk(value_node, sub)
                elif not (isinstance(value_node, yaml.ScalarNode) and value_of(value_node) is None):
                    errors.append((line, f"{dotted} must be a mapping of settings"))
                continue
            parsed.warnings.append(_at(line, f"unknown {'section' if not path else 'key'} {dotted} (ignored)"))

    walk(node, ())
    if errors:
        raise ConfigImportError(errors)
    return parsed


def _walk_mcp(node: yaml.Node, line: int, parsed: ParsedConfig, errors: list, value_of) -> None:
    """Each server's raw entry and the line of every key in it (values are checked on import)."""
    if isinstance(node, yaml.ScalarNode) and value_of(node) is None:
        return
    if not isinstance(node, yaml.MappingNode):
        errors.append((line, "mcp_servers must be a mapping of server names to their settings"))
        return

    def key_lines(sub: yaml.Node, name: str, prefix: str) -> None:
        if isinstance(sub, yaml.MappingNode):
            for key, value_node, key_line in _mapping_items(sub, f"mcp_servers.{name}.{prefix}".rstrip("."), errors):
                dotted = f"{prefix}.{key}" if prefix else key
                parsed.mcp_lines[(name, dotted)] = key_line
                key_lines(value_node, name, dotted)

    for name, server_node, server_line in _mapping_items(node, "mcp_servers", errors):
        parsed.mcp[name] = value_of(server_node)
        parsed.mcp_lines[(name, "")] = server_line
        key_lines(server_node, name, "")


def _mcp_line(parsed: ParsedConfig, name: str, key: str) -> int | None:
    """The line of ``key`` in server ``name``, or of the nearest enclosing key that has one."""
    parts = key.split(".") if key and key != "name" else []
    for n in range(len(parts), -1, -1):
        line = parsed.mcp_lines.get((name, ".".join(parts[:n])))
        if line is not None:
            return line
    return None


def _mcp_problems(parsed: ParsedConfig, name: str, problems: list[tuple[str, str]]) -> list[tuple[int | None, str]]:
    return [(_mcp_line(parsed, name, key), f"mcp_servers.{name}{'.' + key if key and key != 'name' else ''} "
                                           f"{message}") for key, message in problems]


def _validate_mcp(parsed: ParsedConfig) -> tuple[dict[str, dict[str, Any]], list, list[str]]:
    """Every server of the file checked (keep placeholders resolved): (values, errors, warnings)."""
    rows = {row.name: row for row in MCPServer.objects.filter(name__in=list(parsed.mcp))}
    servers, errors, warnings = {}, [], []
    for name, raw in parsed.mcp.items():
        try:
            stored = mcp_config.stored_secrets(rows.get(name))
            servers[name], found = mcp_config.validate_server(name, raw, stored=stored)
        except mcp_config.MCPConfigError as exc:
            errors += _mcp_problems(parsed, name, exc.errors)
        else:
            warnings += [_at(line, message) for line, message in _mcp_problems(parsed, name, found)]
    return servers, errors, warnings


def _take(parsed: ParsedConfig, errors: list, target: tuple[str, str], value: Any, line: int, dotted: str) -> None:
    group, name = target
    if dotted.endswith("threshold_percent"):
        value = _threshold_from_percent(value, parsed, line)
    elif dotted.endswith("abort_on_summary_failure"):
        if isinstance(value, bool):
            value = "abort" if value else "fallback"
        else:
            errors.append((line, f"{dotted} must be true or false; got {value!r}"))
            return
    if name in parsed.values.get(group, {}):
        previous = parsed.lines[(group, name)]
        if parsed.values[group][name] != value:
            errors.append((line, f"{dotted} conflicts with the value on line {previous}"))
        return
    parsed.values.setdefault(group, {})[name] = value
    parsed.lines[(group, name)] = line


def _threshold_from_percent(value: Any, parsed: ParsedConfig, line: int) -> Any:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 < value <= 100:
        fraction = round(value / 100, 6)
        parsed.warnings.append(_at(line, f"compression.threshold_percent: {value} read as a percentage "
                                         f"(threshold {fraction})"))
        return fraction
    return value


# --- Import -------------------------------------------------------------------------------------


def import_config(text: str, *, user=None, source: str = "import", dry_run: bool = False) -> ImportResult:
    """Validate and store every setting in ``text`` in one transaction (nothing on any error).

    Raises ``ConfigImportError`` naming the line of each problem.
    """
    parsed = parse_config_yaml(text)
    servers, mcp_errors, mcp_warnings = _validate_mcp(parsed)
    try:
        with transaction.atomic():
            before = settings_store.current()
            config = settings_store.save_groups(parsed.values, user=user, source=source)
            problems = mcp_errors + _installation_problems(parsed, config)
            if problems:
                raise ConfigImportError(problems)
            _check_terminal(parsed, config)
            changes = _diff(before, config, parsed.values)
            mcp_changes: dict[str, dict[str, tuple[str, str]]] = {}
            for name, values in servers.items():
                try:
                    _, mcp_changes[name] = mcp_config.server_apply(name, values, user=user, source=source)
                except mcp_config.MCPConfigError as exc:  # a stored secret went away since the check
                    raise ConfigImportError(_mcp_problems(parsed, name, exc.errors)) from None
            if dry_run:
                transaction.set_rollback(True)
    except ConfigValueError as exc:
        raise ConfigImportError(
            [(parsed.lines.get((e.group, e.field)), f"{e.key} {e.message}") for e in exc.all] + mcp_errors) from None
    return ImportResult(changes=changes, warnings=parsed.warnings + mcp_warnings, config=config,
                        mcp_changes={name: fields for name, fields in mcp_changes.items() if fields})


def _installation_problems(parsed: ParsedConfig, config: RuntimeConfig) -> list[tuple[int | None, str]]:
    """What the forms refuse beyond the validator, for each group in the file (its stored values
    with the file's applied), at the line of the key refused (else the group's first key)."""
    errors: list[tuple[int | None, str]] = []
    for group in parsed.values:
        first = min((line for (g, _), line in parsed.lines.items() if g == group), default=None)
        for name, message in model_checks.settings_problems(group, config_values(getattr(config, group))):
            errors.append((parsed.lines.get((group, name), first), message))
    return errors


def _check_terminal(parsed: ParsedConfig, config: RuntimeConfig) -> None:
    """Refuse (inside the import's transaction, so nothing is kept) a terminal that cannot be sandboxed."""
    agent = parsed.values.get("agent", {})
    if not config.agent.terminal_enabled or not {"terminal_enabled", "terminal_network"} & set(agent):
        return
    reason = guards.terminal_sandbox_problem(network=config.agent.terminal_network)
    if reason:
        line = parsed.lines.get(("agent", "terminal_enabled")) or parsed.lines.get(("agent", "terminal_network"))
        raise ConfigImportError([(line, f"agent.terminal_enabled cannot be true: the terminal's sandbox cannot "
                                        f"start on this server ({reason})")])


def _diff(before: RuntimeConfig, after: RuntimeConfig, groups: Mapping[str, Any]) -> dict:
    changes: dict[str, dict[str, tuple[str, str]]] = {}
    for group in groups:
        old, new = config_values(getattr(before, group)), config_values(getattr(after, group))
        for name in old:
            if old[name] != new[name]:
                changes.setdefault(group, {})[name] = (
                    settings_store.display_value(group, name, old[name]),
                    settings_store.display_value(group, name, new[name]),
                )
    return changes


# --- Export -------------------------------------------------------------------------------------


def config_to_dict(config: RuntimeConfig) -> dict[str, Any]:
    """The nested config.yaml mapping of ``config``, secrets left out."""
    out: dict[str, Any] = {}
    for group in EXPORT_ORDER:
        values = {k: v for k, v in config_values(getattr(config, group)).items() if not is_secret(group, k)}
        node = out
        *parents, last = YAML_SECTIONS[group]
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = values
    return out


def export_config(config: RuntimeConfig | None = None) -> str:
    """The settings (the current ones by default) and every MCP server as config.yaml text.

    Secrets are never included: API keys are left out, MCP env and header values are written as "***"."""
    config = config or settings_store.current()
    data = config_to_dict(config)
    servers = {row.name: mcp_config.to_hermes(mcp_config.field_values(row)) for row in MCPServer.objects.all()}
    if servers:
        data["mcp_servers"] = servers
    header = ("# Hermes Web settings (config.yaml). Secrets such as API keys are not exported; MCP env and\n"
              "# header values are written as \"***\", which an import reads as \"keep the stored value\".\n"
              "# Import with the admin's \"Import config.yaml\" page or `manage.py import_config <file>`.\n")
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)

