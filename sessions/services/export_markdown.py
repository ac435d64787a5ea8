"""A conversation as a readable Markdown transcript, streamed, and the same transcript as HTML for
the "read as a document" page.

What it holds, in message order (every visible message, read with `QuerySet.iterator` in batches
of `BATCH`, so memory stays flat whatever the conversation's length):

- a title heading, one metadata line and a note on what follows;
- each message under a heading naming its role and time; a user message's attachments as links to
  their download URLs (`attachment-file`, served to the owner only);
- an assistant's tool calls (the tool's name, its arguments in a fenced block) and each tool
  result in a fenced block, both cut at `TOOL_TEXT_LIMIT` characters with a line saying how long
  they were in all (the JSON export keeps them whole);
- each compaction as a divider where it happened: a horizontal rule, "Compacted N messages into M
  (before → after tokens, trigger)" and the summary as a quote;
- the archived originals, collapsed in `<details>` sections: the messages a compaction summarised,
  and the replies and messages replaced by a regenerate or an edit (nested when both).

Safety: the only raw HTML written is the `<details>`/`<summary>` lines made here, their labels
escaped. Message text stays Markdown with its raw HTML neutralised (`markdown_safe`) and any code
fence it leaves open closed, so no message can close a section, open a script or swallow the rest
of the document, even in a renderer that passes HTML through. Fenced blocks get a fence longer
than any backtick run of their content. Nothing secret is written: no system prompt, share link or
engine state.

`iter_parts` yields the structure once; `iter_markdown` writes it as Markdown; `iter_document_html`
as HTML through the project's own renderer (`sessions.markdown`: escaping, sanitised).
"""
from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice
from typing import NamedTuple

from django.urls import reverse
from markdown_it import MarkdownIt

from compression.core.markers import strip_summary_wrapping
from sessions import selectors
from sessions.markdown import render_markdown
from sessions.models import CompressionEvent, Conversation, Message
from sessions.services.attachments import human_size
from sessions.transcript import attachments_of_messages, typed_text

TOOL_TEXT_LIMIT = 4_000  # characters of a tool call's arguments or a tool result shown here
BATCH = 500  # messages read per query (and per attachment lookup)
ROLE_LABELS = {"user": "User", "assistant": "Assistant", "tool": "Tool result", "system": "System"}
KIND_LABELS = {"image": "image", "pdf": "PDF", "text": "text file"}
NOTE = ("Archived originals (what a compaction summarised, and replies or messages replaced by a regenerate "
        f"or an edit) are in the collapsed sections. Tool calls and results longer than {TOOL_TEXT_LIMIT:,} "
        "characters are cut here; the JSON export holds everything.")

# CommonMark with raw HTML on: it finds what a renderer that passes HTML through would pass.
_CHECK = MarkdownIt("commonmark")
_PRECISE_ROUNDS = 1  # then every `<` outside code, then every `<` at all
_ROUNDS = 3
_BACKTICKS = re.compile(r"`+")
_INLINE_SPECIALS = re.compile(r"([\\`*_\[\]!|~#])")
_UNRENDERED = render_markdown.__wrapped__  # the document page must not fill the chat's render cache


class Part(NamedTuple):
    """One piece of the transcript. `kind`: "header", "message", "divider" (Markdown in `text`),
    "open" (a collapsed section begins; `text` its label, `role` "compacted" or "replaced") or
    "close". `role`: a message's role."""

    kind: str
    text: str = ""
    role: str = ""


_CLOSE = Part("close")


# Markdown made safe ------------------------------------------------------------------------------

def _has_html(tokens) -> bool:
    return any(t.type == "html_block" or (t.type == "inline" and any(c.type == "html_inline" for c in t.children or ()))
               for t in tokens)


def _escape_outside_code_spans(text: str) -> str:
    """`<` as `&lt;` except inside code spans (CommonMark's rule: a run of n backticks up to the
    next run of exactly n), where an entity would show as written."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            out.append(text[i:i + 2])
            i += 2
        elif c == "`":
            opening = _BACKTICKS.match(text, i)
            assert opening is not None  # text[i] is a backtick
            run = opening.group()
            end = next((m.end() for m in _BACKTICKS.finditer(text, i + len(run)) if len(m.group()) == len(run)), None)
            out.append(text[i:end] if end else run)
            i = end or i + len(run)
        else:
            out.append("&lt;" if c == "<" else c)
            i += 1
    return "".join(out)


def _escaped_precisely(text: str, tokens) -> str:
    """Every `<` outside code spans escaped in the lines of raw HTML blocks and of the blocks whose
    inline text holds raw HTML (an escaped HTML block reads as a paragraph, its code spans kept)."""
    lines = text.split("\n")
    for t in tokens:
        if t.map and (t.type == "html_block" or (t.type == "inline" and any(c.type == "html_inline"
                                                                            for c in t.children or ()))):
            a, b = t.map
            lines[a:b] = _escape_outside_code_spans("\n".join(lines[a:b])).split("\n")
    return "\n".join(lines)


def _escaped_outside_code(text: str, tokens) -> str:
    lines = text.split("\n")
    code = {i for t in tokens if t.type in ("fence", "code_block") and t.map for i in range(*t.map)}
    return "\n".join(line if i in code else line.replace("<", "&lt;") for i, line in enumerate(lines))


def _fence_closed(text: str, tokens) -> str:
    """A top-level fence left open at the end would swallow whatever follows the message: close it."""
    lines = text.split("\n")
    for t in tokens:
        if t.type == "fence" and t.level == 0 and t.map and t.map[1] >= len(lines):
            last = lines[-1]
            closing = last.strip()
            closed = (t.map[1] - t.map[0] > 1 and len(closing) >= len(t.markup) and set(closing) == {t.markup[0]}
                      and len(last) - len(last.lstrip(" ")) <= 3)
            if not closed:
                return f"{text}\n{t.markup}"
    return text


def markdown_safe(text: str) -> str:
    """`text` as Markdown that renders as it did, with no raw HTML a renderer would pass through and
    no code fence left open. Raw HTML is escaped where the parser finds it (code spans kept), then,
    should a pass leave some, every `<` outside code blocks, then every `<`; each pass re-parsed."""
    text = text.strip("\n").rstrip()
    if "<" not in text and "```" not in text and "~~~" not in text:
        return text
    tokens = _CHECK.parse(text)
    for attempt in range(_ROUNDS):
        if not _has_html(tokens):
            return _fence_closed(text, tokens)
        if attempt < _PRECISE_ROUNDS:
            text = _escaped_precisely(text, tokens)
        elif attempt < _ROUNDS - 1:
            text = _escaped_outside_code(text, tokens)
        else:
            text = text.replace("<", "&lt;")
        tokens = _CHECK.parse(text)
    return _fence_closed(text, tokens)


def fenced(text: str, info: str = "") -> str:
    """A fenced code block longer than any backtick run in `text`, so nothing in it closes it."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def code_span(text: str) -> str:
    text = " ".join(text.split("\n")) or "?"
    ticks = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if "`" in text else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def inline_text(text: str) -> str:
    """One line of plain text (a title, a file name) as literal Markdown: HTML escaped, Markdown's
    punctuation backslash-escaped, line breaks as spaces."""
    return _INLINE_SPECIALS.sub(r"\\\1", html.escape(" ".join(str(text).split()), quote=False))


# The pieces ---------------------------------------------------------------------------------------

def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _cut_block(text: str, info: str) -> str:
    if len(text) <= TOOL_TEXT_LIMIT:
        return fenced(text, info)
    return f"{fenced(text[:TOOL_TEXT_LIMIT], info)}\n\n*… (cut, {len(text):,} characters in all)*"


def _arguments(arguments) -> str:
    """A tool call's arguments, indented when they are JSON."""
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(arguments)


def _attachment_link(a, base_url: str) -> str:
    what = [KIND_LABELS.get(a.kind, a.kind), human_size(a.size)]
    if a.pages:
        what.append(f"{a.pages} page{'s' if a.pages != 1 else ''}")
    return f"- [{inline_text(a.name)}]({base_url}{reverse('attachment-file', args=[a.id])}) ({', '.join(what)})"


def _message_text(message: Message, entry: dict) -> str:
    if message.role == "user" and isinstance(message.content, list):
        first = next((p.get("text") or "" for p in message.content if isinstance(p, dict) and p.get("type") == "text"), "")
        return typed_text(first)
    return entry["text"]


def message_markdown(message: Message, attachments=(), base_url: str = "") -> str:
    entry = selectors.transcript_entry(message, None)
    text = _message_text(message, entry)
    if message.role == "system" and message.name == "model_switch":
        return f"*{inline_text(text)}*"
    head = ROLE_LABELS.get(message.role, inline_text(message.role))
    if message.role == "tool":
        head += f" · {code_span(message.name or 'tool')}"
    out = [f"### {head} · {_when(message.created_at)}{' (stopped)' if message.stopped else ''}"]
    if message.role == "tool":
        out.append(_cut_block(text, "text"))
    elif text.strip():
        out.append(markdown_safe(text))
    for call in entry["tool_calls"]:
        out.append(f"**Tool call** {code_span(call['name'] or 'unnamed')}")
        out.append(_cut_block(_arguments(call["arguments"]), "json"))
    if attachments:
        out.append("Attachments:\n\n" + "\n".join(_attachment_link(a, base_url) for a in attachments))
    return "\n\n".join(out)


def divider_markdown(message: Message, event: CompressionEvent | None) -> str:
    if event is not None:
        head = (f"**Compacted {event.messages_before:,} messages into {event.messages_after:,}** "
                f"({event.tokens_before:,} → {event.tokens_after:,} tokens, {event.trigger}) · {_when(event.started_at)}")
        if event.focus_topic:
            head += f" · focus: {inline_text(event.focus_topic)}"
    else:
        head = "**Context compacted**"
    # The summary's prose, without the instructions to the model around it.
    summary = strip_summary_wrapping(event.summary if event is not None and event.summary else
                                     selectors.transcript_entry(message, None)["text"])
    quoted = "\n".join(f"> {line}" if line.strip() else ">" for line in markdown_safe(summary).split("\n"))
    return f"---\n\n{head}\n\n> **Summary**\n>\n{quoted}"


def _compaction_label(event: CompressionEvent | None) -> str:
    if event is None:
        return "Archived originals (compacted)"
    if not event.in_place:  # a rotation ends the whole session: its head and tail are here too
        return (f"Archived originals: the conversation up to the {event.trigger} compaction of "
                f"{_when(event.started_at)}, as it was written (the summary below stands for its middle)")
    return f"Archived originals: the messages the {event.trigger} compaction of {_when(event.started_at)} summarised"


def _replaced_label(message: Message) -> str:
    if message.role == "user":
        return "Replaced by an edit: the original message and what followed it (archived)"
    return "Replaced reply (archived when the reply was regenerated)"


def _header(conversation: Conversation, messages: int, compactions: int) -> str:
    meta = [f"Exported from Hermes Web on {_when(datetime.now(UTC))}",
            f"{inline_text(conversation.model)} ({inline_text(conversation.provider)})",
            f"started {_when(conversation.created_at)}", f"{messages:,} message{'s' if messages != 1 else ''}",
            f"{compactions:,} compaction{'s' if compactions != 1 else ''}"]
    return f"# {inline_text(conversation.title)}\n\n*{' · '.join(meta)}*\n\n{NOTE}"


class _Compactions:
    """Which compaction summarised a message: every message of a session a rotation ended, or an
    archived message before an in-place compaction's summary in its session."""

    def __init__(self, conversation: Conversation):
        events = list(conversation.compression_events.filter(status="compressed").order_by("id"))
        self.count = len(events)
        self.by_summary = {e.summary_message_id: e for e in events if e.summary_message_id}
        self.rotated = {e.session_id: e for e in events if not e.in_place}
        self.in_place: dict[int, list[CompressionEvent]] = {}
        for e in sorted((e for e in events if e.in_place and e.summary_message_id), key=lambda e: e.summary_message_id):
            self.in_place.setdefault(e.session_id, []).append(e)
        self.ended = set(conversation.sessions.filter(ended_at__isnull=False).values_list("id", flat=True))

    def of(self, message: Message) -> tuple[object, CompressionEvent | None]:
        """(a key telling sections apart, the event) for a compacted message; (None, None) otherwise."""
        event = self.rotated.get(message.session_id)
        if event is None and message.archived:
            event = next((e for e in self.in_place.get(message.session_id, ()) if e.summary_message_id > message.id), None)
        if event is not None:
            return event.id, event
        if message.session_id in self.ended or (message.archived and not message.replaced):
            return "archived", None
        return None, None


def iter_parts(conversation: Conversation, *, base_url: str = "") -> Iterator[Part]:
    """The transcript's pieces in order; `base_url` (scheme and host) makes attachment links absolute."""
    compactions = _Compactions(conversation)
    visible = conversation.messages.filter(visible=True)
    yield Part("header", _header(conversation, visible.filter(is_summary=False).count(), compactions.count))
    rows = visible.order_by("id").iterator(chunk_size=BATCH)
    section, replaced = None, False
    while batch := list(islice(rows, BATCH)):
        files = attachments_of_messages([m.id for m in batch if m.role == "user" and isinstance(m.content, list)])
        for m in batch:
            key, event = (None, None) if m.is_summary else compactions.of(m)
            if m.is_summary or key != section:
                if replaced:
                    yield _CLOSE
                    replaced = False
                if section is not None:
                    yield _CLOSE
                section = None
            if m.is_summary:
                yield Part("divider", divider_markdown(m, compactions.by_summary.get(m.id)))
                continue
            if key is not None and section is None:
                yield Part("open", _compaction_label(event), "compacted")
                section = key
            if m.replaced != replaced:
                yield Part("open", _replaced_label(m), "replaced") if m.replaced else _CLOSE
                replaced = m.replaced
            yield Part("message", message_markdown(m, files.get(m.id, ()), base_url), m.role)
    if replaced:
        yield _CLOSE
    if section is not None:
        yield _CLOSE


def iter_markdown(conversation: Conversation, *, base_url: str = "") -> Iterator[str]:
    """The transcript as Markdown, a piece at a time (UTF-8 text; sections as `<details>`)."""
    for part in iter_parts(conversation, base_url=base_url):
        if part.kind == "open":
            yield f"<details>\n<summary>{html.escape(part.text)}</summary>\n\n"
        elif part.kind == "close":
            yield "</details>\n\n"
        else:
            yield f"{part.text}\n\n"


def iter_document_html(conversation: Conversation) -> Iterator[str]:
    """The transcript as sanitised HTML, a piece at a time: each piece's Markdown rendered by
    `sessions.markdown` (raw HTML escaped, then cleaned), the sections as `<details>` made here."""
    for part in iter_parts(conversation):
        if part.kind == "open":
            yield (f'<details class="export-archived" data-kind="{part.role}">'
                   f"<summary>{html.escape(part.text)}</summary>")
        elif part.kind == "close":
            yield "</details>"
        elif part.kind == "message":
            yield f'<article class="export-message" data-role="{html.escape(part.role)}">{_UNRENDERED(part.text)}</article>'
        elif part.kind == "divider":
            yield f'<section class="export-divider" data-role="summary">{_UNRENDERED(part.text)}</section>'
        else:
            yield f'<header class="export-header">{_UNRENDERED(part.text)}</header>'
