"""The deterministic local summary used when ``on_summary_failure = "fallback"`` (SPEC §6).

Guarantees: built without any model call from the turns being dropped; uses the SPEC template's
headings; says plainly that it is a locally generated fallback; lists the tools called, the files
touched, the errors seen and the last user ask (recorded once); secrets redacted; at most 8,000
chars. The previous summary, when there is one, is carried forward (capped) so nothing known is lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .markers import is_summary_only, message_text
from .redact import redact

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
_PATH_IN_TEXT = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?[\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8})(?![\w/])")


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
    fn = call.get("function") or {}
    try:
        parsed = json.loads(fn.get("arguments") or "{}")
    except (ValueError, TypeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def build_fallback_summary(
    turns: Sequence[Mapping[str, Any]], reason: str, previous_summary: str | None = None
) -> str:
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
        for call in msg.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            name = str((call.get("function") or {}).get("name") or "?")
            args = _args(call)
            target = next((str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)), "")
            target = target or str(args.get("command") or args.get("pattern") or "")
            actions.append(f"{name} {_squeeze(target, 120)}".strip())
            files.extend(str(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str))
        if role == "tool" and _ERROR_WORDS.search(text):
            errors.append(_squeeze(text, 300))
        if role in ("user", "assistant"):
            files.extend(m.group(1) for m in _PATH_IN_TEXT.finditer(text) if "/" in m.group(1) or "." in m.group(1))

    actions = _unique(actions, MAX_ACTIONS)
    lines = [FALLBACK_NOTICE, "", "## Goal"]
    lines.append(f"Latest user request before these turns: '{_squeeze(last_user)}'" if last_user else "Unknown.")
    lines += ["", "## Constraints & Preferences", "Unknown (not recoverable without the summariser).", ""]
    lines += ["## Progress", "### Done"]
    lines += [f"{i}. Called {a}" for i, a in enumerate(actions, 1)] or ["Nothing recorded."]
    lines += ["### In Progress", "Unknown — check the latest messages.", "### Blocked"]
    lines += [f"- {e}" for e in _unique(errors, MAX_ERRORS)] or ["None seen."]
    lines += ["", "## Key Decisions", "Unknown.", "", "## Relevant Files"]
    lines += [f"- {f}" for f in _unique(files, MAX_FILES)] or ["None recorded."]
    lines += ["", "## Next Steps", "Continue from the latest user message after this summary.", ""]
    lines += [
        "## Critical Context",
        f"{len(turns)} earlier messages were compacted; summariser failure: {_squeeze(reason, 200)}.",
    ]
    if previous_summary:
        lines += ["", "Previous summary (carried forward):", previous_summary.strip()[:PREVIOUS_SUMMARY_MAX_CHARS]]
    text = redact("\n".join(lines))
    if len(text) > FALLBACK_MAX_CHARS:
        text = text[: FALLBACK_MAX_CHARS - 40].rstrip() + "\n...[fallback summary truncated]"
    return text
