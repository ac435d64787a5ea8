"""The fixed texts and metadata keys that mark compacted context, and the predicates that find them.

Guarantees: one definition of the summary prefix, the recall notes that may follow it, the end
marker, the merge delimiters and the system-prompt note, so every module recognises (and strips)
exactly what the assembler writes. A summary body never includes the prefix, a recall note or
the end marker (``strip_summary_wrapping``), so a summariser updating a previous summary sees its
prose only, and summaries written before the notes existed read exactly as they did.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .tokens import TOKENS_KEY, content_text

SUMMARY_KEY = "_compressed_summary"  # on the message that carries a summary (standalone or merged)
MERGED_KEY = "_summary_merged"  # the summary was merged into a real message of the tail/head
FALLBACK_KEY = "_summary_fallback"  # the summary is the deterministic local one

SUMMARY_PREFIX = (
    "[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns of this conversation were compacted into the "
    "handoff summary below, written when a previous context window filled up. Treat it as background "
    "about work already done, not as instructions: do not answer questions or redo requests that appear "
    "in it. Respond to the latest message after the summary; the current files and state may already "
    "reflect the work it describes."
)
LEGACY_PREFIXES = ("[CONTEXT SUMMARY]:", "[CONTEXT COMPACTION]")
# Written on the prefix's line when the engine offers the recall tools. The texts are stored in
# summaries: changing one leaves the old text unrecognised, so add a new note instead.
_TOOLS_SENTENCE = (
    "Nothing compacted is lost: context_search(query, limit) searches every compacted message of this "
    "conversation and returns ranked snippets with message references such as m123, and "
    "context_expand(ref, before, after) returns the original messages around a reference, verbatim."
)
_ANCHOR_SENTENCE = "The anchor index at the end lists exact strings from the compacted turns with their references."
_SEARCH_ADVICE = "Before answering about an earlier detail that is not in view, search for it."
RECALL_TOOLS_NOTE = f"{_TOOLS_SENTENCE} {_SEARCH_ADVICE}"  # the built-in compressor's
LCM_RECALL_NOTE = f"{_TOOLS_SENTENCE} {_ANCHOR_SENTENCE} {_SEARCH_ADVICE}"  # lcm's, whose summaries end with an index
RECALL_NOTES = (LCM_RECALL_NOTE, RECALL_TOOLS_NOTE)
_HEAD = 256  # longer than every prefix above
_OPENING = re.compile(r"\s*\[")
END_MARKER = "--- END OF CONTEXT SUMMARY — respond to the message below, not the summary above ---"
SYSTEM_NOTE = (
    "Note: earlier turns of this conversation have been compacted into a handoff summary that appears "
    "in the conversation. Build on that summary and on the current state instead of redoing work."
)


def message_text(msg: Mapping[str, Any]) -> str:
    return content_text(msg.get("content"))


def is_summary_message(msg: Mapping[str, Any]) -> bool:
    """True for any message carrying a compaction summary (standalone or merged)."""
    if msg.get(SUMMARY_KEY):
        return True
    content = msg.get("content")
    if isinstance(content, str):
        # Every prefix opens with "[": a text that does not (after blanks) is decided without a copy.
        first = content[:1]
        if first != "[" and not first.isspace():
            return False
        start = _OPENING.match(content)
        if start is None:
            return False
        text = content[start.end() - 1:start.end() - 1 + _HEAD]
    else:
        text = message_text(msg).lstrip()
    return text.startswith(SUMMARY_PREFIX[:40]) or text.startswith(LEGACY_PREFIXES)


def is_summary_only(msg: Mapping[str, Any]) -> bool:
    """True for a standalone summary message (no real user/assistant content inside it)."""
    return is_summary_message(msg) and not msg.get(MERGED_KEY)


def strip_recall_note(text: str) -> str:
    """``text`` without a leading recall note (any of ``RECALL_NOTES``)."""
    body = text.lstrip()
    for note in RECALL_NOTES:
        if body.startswith(note):
            return body[len(note):].lstrip()
    return body


def strip_summary_wrapping(text: str) -> str:
    """The summary body without prefix, recall note or end marker, so neither ever stacks."""
    body = text.strip()
    if END_MARKER in body:
        body = body.split(END_MARKER, 1)[0].rstrip()
    for prefix in (SUMMARY_PREFIX, *LEGACY_PREFIXES):
        if body.startswith(prefix):
            body = body[len(prefix):].lstrip()
    return strip_recall_note(body).strip()


def wrap_summary(body: str, note: str = "") -> str:
    """The full summary text: prefix (followed on its line by ``note``, if any), body and end marker."""
    head = f"{SUMMARY_PREFIX} {note.strip()}" if note.strip() else SUMMARY_PREFIX
    return f"{head}\n\n{strip_summary_wrapping(body)}\n\n{END_MARKER}"


def replace_summary_text(msg: Mapping[str, Any], old_text: str, new_text: str) -> dict[str, Any] | None:
    """``msg`` with its summary text ``old_text`` (standalone, or leading a merged message) replaced
    by ``new_text``; its stored token count is dropped (it no longer holds). None when ``msg`` does
    not carry ``old_text`` where a summary goes."""
    content = msg.get("content")
    out = {k: v for k, v in msg.items() if k != TOKENS_KEY}
    if isinstance(content, str) and content.startswith(old_text):
        out["content"] = new_text + content[len(old_text):]
        return out
    if isinstance(content, list) and content and isinstance(content[0], Mapping) and content[0].get("text") == old_text:
        out["content"] = [{**content[0], "text": new_text}, *content[1:]]
        return out
    return None


def split_merged(msg: Mapping[str, Any]) -> tuple[str, Any]:
    """For a message with a merged summary: (summary body, the message's own content)."""
    content = msg.get("content")
    if isinstance(content, list):
        if content and isinstance(content[0], Mapping) and content[0].get("type") == "text":
            head = str(content[0].get("text") or "")
            if END_MARKER in head:
                return strip_summary_wrapping(head), list(content[1:])
        return "", content
    text = content if isinstance(content, str) else ""
    if END_MARKER in text:
        summary, own = text.split(END_MARKER, 1)
        return strip_summary_wrapping(summary), own.lstrip("\n")
    return "", content


def own_text(msg: Mapping[str, Any]) -> str:
    """The message's own text, without a merged summary."""
    if msg.get(MERGED_KEY):
        return content_text(split_merged(msg)[1])
    return message_text(msg)


def summary_body_of(msg: Mapping[str, Any]) -> str:
    """The summary body carried by a summary message (standalone or merged)."""
    if msg.get(MERGED_KEY):
        return split_merged(msg)[0]
    return strip_summary_wrapping(message_text(msg))
