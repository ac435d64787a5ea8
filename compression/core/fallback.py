"""The deterministic local summary used when ``on_summary_failure = "fallback"`` (SPEC §6).

Guarantees: built without any model call from the turns being dropped; uses the SPEC template's
headings; says plainly that it is a locally generated fallback; lists the tools called, the files
touched, the errors seen and the last user ask (recorded once); secrets redacted; at most 8,000
chars. The previous summary, when there is one, is carried forward (capped) so nothing known is lost.
A call that ran a command is listed with the command itself (and its working directory), never
the directory alone; POSIX and Windows paths are kept whole. Malformed tool calls are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .markers import is_summary_only, message_text
from .redact import redact
from .template import TEMPLATE_HEADINGS
from .tokens import call_function, tool_calls_of

FALLBACK_MAX_CHARS = 8_000
TURN_MAX_CHARS = 700
PREVIOUS_SUMMARY_MAX_CHARS = 3_000
MAX_ACTIONS, MAX_ERRORS, MAX_FILES = 12, 5, 12
FALLBACK_NOTICE = (
    "(Fallback summary generated locally because the summariser failed; it lists what was done but "
    "may miss details. Verify the current state before relying on it.)"
)

_ERROR_WORDS = re.compile(r"(?i)\b(error|failed|failure|exception|traceback|timeout|fatal)\b")
_PATH_KEYS = ("path", "file_path", "workdir", "output_path")
_FILE_KEYS = ("path", "file_path", "output_path")
_COMMAND_KEYS = ("command", "cmd")
_DIR_KEYS = ("workdir", "cwd")
_QUERY_KEYS = ("pattern", "query", "url")
ACTION_MAX_CHARS = 240
# A file path in prose: optional root (a drive like C:\, a UNC \\, ./, ../ or /), segments joined by
# / or \, ending in an extension. Windows separators count, so C:\repo\app.py is kept whole.
_PATH_IN_TEXT = re.compile(
    r"(?<![\w/\\.:-])((?:[A-Za-z]:[\\/]|\\\\|\.{0,2}[\\/])?[\w.-]+(?:[\\/][\w.-]+)*\.[A-Za-z0-9]{1,8})(?![\w/\\])"
)


def _squeeze(text: str, limit: int = TURN_MAX_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keep_head = int(limit * 0.6)
    keep_tail = limit - keep_head - 5
    return text[:keep_head] + " ... " + text[-keep_tail:]


def _unique(items: list[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return list(seen)[:limit]


def _args(call: Mapping[str, Any]) -> dict[str, Any]:
    raw = call_function(call).get("arguments")
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        parsed = json.loads(raw or "{}")
    except (ValueError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _first_str(args: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    return next((args[k] for k in keys if isinstance(args.get(k), str) and args[k].strip()), "")


def describe_call(name: str, args: Mapping[str, Any]) -> str:
    """What one call did, e.g. ``terminal `python /repo/scripts/fix.py` in /repo`` or ``read_file src/app.py``."""
    command = _first_str(args, _COMMAND_KEYS)
    where = _first_str(args, _DIR_KEYS)
    if command:
        text = f"{name} `{' '.join(command.split())}`" + (f" in {where}" if where else "")
    elif _first_str(args, _FILE_KEYS):
        text = f"{name} {_first_str(args, _FILE_KEYS)}"
    elif _first_str(args, _QUERY_KEYS):
        text = f"{name} '{_first_str(args, _QUERY_KEYS)}'" + (f" in {where}" if where else "")
    elif where:
        text = f"{name} in {where}"
    else:
        shown = [f"{k}={' '.join(str(v).split())[:60]}" for k, v in list(args.items())[:2]]
        text = " ".join([name, *shown])
    return _squeeze(text, ACTION_MAX_CHARS)


def _gleaned(turns: Sequence[Mapping[str, Any]]) -> tuple[str, list[str], list[str], list[str]]:
    """(the latest user request, the tool calls made, the files named, the errors seen) of ``turns``."""
    actions: list[str] = []
    files: list[str] = []
    errors: list[str] = []
    last_user = ""
    for msg in turns:
        if is_summary_only(msg):
            continue
        role = msg.get("role")
        text = message_text(msg)
        if role == "user" and text.strip():
            last_user = text
        for call in tool_calls_of(msg):
            name = str(call_function(call).get("name") or "?")
            args = _args(call)
            actions.append(describe_call(name, args))
            files.extend(str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str))
        if role == "tool" and _ERROR_WORDS.search(text):
            errors.append(_squeeze(text, 300))
        if role in ("user", "assistant"):
            files.extend(m.group(1) for m in _PATH_IN_TEXT.finditer(text) if "/" in m.group(1) or "." in m.group(1))
    return last_user, actions, files, errors


def build_fallback_summary(
    turns: Sequence[Mapping[str, Any]], reason: str, previous_summary: str | None = None
) -> str:
    last_user, actions, files, errors = _gleaned(turns)
    actions = _unique(actions, MAX_ACTIONS)
    goal, constraints, progress, done, in_progress, blocked, decisions, relevant, next_steps, critical = (
        TEMPLATE_HEADINGS
    )
    sections = {
        goal: [f"Latest user request before these turns: '{_squeeze(last_user)}'" if last_user else "Unknown."],
        constraints: ["Unknown (not recoverable without the summariser)."],
        progress: [],
        done: [f"{i}. Called {a}" for i, a in enumerate(actions, 1)] or ["Nothing recorded."],
        in_progress: ["Unknown — check the latest messages."],
        blocked: [f"- {e}" for e in _unique(errors, MAX_ERRORS)] or ["None seen."],
        decisions: ["Unknown."],
        relevant: [f"- {f}" for f in _unique(files, MAX_FILES)] or ["None recorded."],
        next_steps: ["Continue from the latest user message after this summary."],
        critical: [f"{len(turns)} earlier messages were compacted; summariser failure: {_squeeze(reason, 200)}."],
    }
    lines = [FALLBACK_NOTICE]
    for heading in TEMPLATE_HEADINGS:
        if heading.startswith("## "):
            lines.append("")
        lines += [heading, *sections[heading]]
    if previous_summary:
        lines += ["", "Previous summary (carried forward):", previous_summary.strip()[:PREVIOUS_SUMMARY_MAX_CHARS]]
    text = redact("\n".join(lines))
    if len(text) > FALLBACK_MAX_CHARS:
        text = text[: FALLBACK_MAX_CHARS - 40].rstrip() + "\n...[fallback summary truncated]"
    return text
