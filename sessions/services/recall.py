"""Recall: full-text search and verbatim expansion over a conversation's stored messages, for the
agent's context tools (`context_search`, `context_expand`) and the user's search.

The index is the database's own (migration 0005; ``recall_index``): SQLite FTS5, kept by
triggers, or a generated PostgreSQL tsvector with a GIN index. Only originals are searched (visible, not summaries); the
agent's searches see only what was compacted (archived rows, or rows of an ended session), the
user's the whole conversation. A message's reference is ``m<id>``; a copy carried into a new
context resolves to its original, so a reference always opens the message the user saw.

When a search finds too little, ``suggest_terms`` (``recall_suggest``) offers the conversation's own
words closest in spelling to the query's; the query's words themselves are read by ``search_terms``
(``recall_terms``). The names of both modules are re-exported here.
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from compression.core.tokens import call_function, content_text, is_image_part, tool_calls_of
from sessions.models import Message, Session
from sessions.services.recall_index import (
    BACKENDS,
    COUNT_CAP,
    FTS_TABLE,
    MARK_END,
    MARK_START,
    RecallUnavailable,
    index_ensure,
    index_ensure_after_migrate,
    index_present,
)
from sessions.services.recall_suggest import _SUGGEST_STOPWORDS as _SUGGEST_STOPWORDS
from sessions.services.recall_suggest import _WORD as _WORD
from sessions.services.recall_suggest import SUGGEST_MAX_LIMIT as SUGGEST_MAX_LIMIT
from sessions.services.recall_suggest import SUGGEST_MIN_CHARS as SUGGEST_MIN_CHARS
from sessions.services.recall_suggest import SUGGEST_QUERY_WORDS as SUGGEST_QUERY_WORDS
from sessions.services.recall_suggest import SUGGEST_SPELLING_READS as SUGGEST_SPELLING_READS
from sessions.services.recall_suggest import _fold as _fold
from sessions.services.recall_suggest import _spelling as _spelling
from sessions.services.recall_suggest import _suggestion_inputs as _suggestion_inputs
from sessions.services.recall_suggest import suggest_terms
from sessions.services.recall_suggest import trigram_similarity as trigram_similarity
from sessions.services.recall_suggest import trigrams as trigrams
from sessions.services.recall_terms import _STOPWORDS as _STOPWORDS
from sessions.services.recall_terms import _TERM as _TERM
from sessions.services.recall_terms import SEARCH_MAX_TERMS as SEARCH_MAX_TERMS
from sessions.services.recall_terms import TERM_MAX_CHARS as TERM_MAX_CHARS
from sessions.services.recall_terms import search_terms
from sessions.services.recall_words import SUGGEST_MIN_SIMILARITY as SUGGEST_MIN_SIMILARITY
from sessions.services.recall_words import words_ensure as words_ensure

__all__ = ["FTS_TABLE", "MARK_END", "MARK_START", "RecallUnavailable", "index_ensure", "index_ensure_after_migrate",
           "index_present"]

SEARCH_MAX_LIMIT = 20
EXPAND_MAX_NEIGHBOURS = 10
EXPAND_MESSAGE_MAX_CHARS = 6_000
EXPAND_TOTAL_MAX_CHARS = 16_000
# Copies are matched to their original among this many earlier candidates (newest first).
ORIGINAL_LOOKBACK = 200
_REF = re.compile(r"^\s*#?m?(\d{1,18})\s*$", re.I)


class BadReference(ValueError):
    """A reference that names no message of this conversation."""


def ref_of(message_id: int) -> str:
    return f"m{message_id}"


def parse_ref(ref) -> int:
    """``m123``, ``#m123``, ``123`` or 123 → 123; anything else is a ``BadReference``."""
    if isinstance(ref, int) and not isinstance(ref, bool) and ref > 0:
        return ref
    match = _REF.match(str(ref or ""))
    if not match:
        raise BadReference(f"not a message reference: {str(ref)[:40]!r} (references look like m123)")
    return int(match.group(1))


@dataclass(frozen=True)
class Hit:
    id: int
    role: str
    name: str
    marked: str  # the snippet with MARK_START/MARK_END around matched words
    score: float
    created_at: datetime | None
    compacted: bool  # archived, or in an ended session: no longer in the model's context as itself

    @property
    def ref(self) -> str:
        return ref_of(self.id)

    @property
    def snippet(self) -> str:
        return self.marked.replace(MARK_START, "").replace(MARK_END, "")

    @property
    def snippet_html(self) -> str:
        """The snippet escaped for HTML, matched words in <mark>."""
        return html.escape(self.marked).replace(MARK_START, "<mark>").replace(MARK_END, "</mark>")


def search(*, conversation_id, query: str, limit: int = 5, compacted_only: bool = False) -> list[Hit]:
    """Ranked hits for ``query`` among the conversation's originals, best first.

    Coordination-level matching: the messages holding every word of the query come first, then,
    while fewer than ``limit`` were found, those holding all but the commonest remaining word, and
    so on down to the rarest word alone, then each other word alone unless it is common (in
    ``COUNT_CAP`` messages or more). Words absent from the conversation are left out. Each step is
    one indexed conjunction, so the cost stays a few index lookups however common the query's
    words are; within a step the database's own ranking (bm25, ts_rank_cd) orders, ties newest
    first."""
    backend = BACKENDS.get(connection.vendor)
    if backend is None:
        raise RecallUnavailable(f"full-text search needs SQLite or PostgreSQL (this database is {connection.vendor})")
    terms = search_terms(query)
    limit = max(1, min(SEARCH_MAX_LIMIT, int(limit)))
    if not terms:
        return []
    index_ensure()
    counts = dict(zip(terms, backend.counts(conversation_id, terms)))
    present = sorted((t for t in terms if counts[t]), key=lambda t: (counts[t], terms.index(t)))
    levels = [present[:k] for k in range(len(present), 0, -1)]
    levels += [[t] for t in present[1:] if counts[t] < COUNT_CAP]
    ranked: list[tuple[int, float, str]] = []
    for level in levels:
        if len(ranked) >= limit:
            break
        found = backend.ranked(conversation_id, level, present, limit - len(ranked), [r[0] for r in ranked],
                               compacted_only)
        ranked.extend((message_id, len(level) + score / (1 + abs(score)), marked) for message_id, score, marked in found)
    info = {row["id"]: row for row in Message.objects.filter(id__in=[r[0] for r in ranked]).values(
        "id", "role", "name", "created_at", "archived", "session__ended_at")}
    hits = []
    for message_id, score, marked in ranked:
        row = info.get(message_id)
        if row is None:  # deleted between the two reads
            continue
        hits.append(Hit(id=message_id, role=row["role"], name=row["name"], marked=marked, score=score,
                        created_at=row["created_at"],
                        compacted=bool(row["archived"] or row["session__ended_at"] is not None)))
    return hits


# Expansion -------------------------------------------------------------------------------------

def attachment_note(part: dict) -> str:
    """What an attached image or PDF part was, in words for the agent (its data is never shown):
    after a compaction the image itself is gone from the context, and only the user can send it again."""
    if part.get("type") == "document":
        meta = part.get("_document") or {}
        pages = meta.get("pages")
        what = f"PDF “{meta.get('name') or 'document'}”" + (f" ({pages} page{'s' if pages != 1 else ''})" if pages else "")
        text = str(meta.get("text") or "").strip()
        if not text:
            return f"[{what} was attached here by the user; it has no text layer.]"
        return f"[{what} was attached here by the user; its text follows.]\n{text}"
    meta = part.get("_image") or {}
    size = f" ({meta['width']}×{meta['height']} px as sent)" if meta.get("width") and meta.get("height") else ""
    what = f"An image, “{meta['name']}”{size}," if meta.get("name") else "An image"
    return (f"[{what} was attached here by the user. The image itself is no longer in the context: "
            "to look at it again, ask the user to re-attach it.]")


def _content_text(content) -> str:
    """The content as text; an attached image or PDF as a note saying what was there."""
    if not isinstance(content, list):
        return content_text(content)
    texts = []
    for part in content:
        if isinstance(part, dict) and (is_image_part(part) or part.get("type") == "document"):
            texts.append(attachment_note(part))
        else:
            texts.append(content_text([part]))
    return "\n".join(t for t in texts if t)


def message_text(role: str, content, tool_calls, name: str = "") -> str:
    """A stored message as plain text: its content (attachments as notes), then one line per
    tool call."""
    parts = [_content_text(content)] if content not in (None, "", []) else []
    for call in tool_calls_of({"tool_calls": tool_calls}):
        fn = call_function(call)
        parts.append(f"[tool call {fn.get('name', '')}({fn.get('arguments', '')})]")
    return "\n".join(p for p in parts if p)


def _originals(conversation_id):
    return Message.objects.filter(conversation_id=conversation_id, visible=True, is_summary=False).select_related(
        "session")


def neighbourhood(*, conversation_id, message_id: int, before: int, after: int) -> list[Message]:
    """The original ``message_id`` with up to ``before``/``after`` originals around it, in order."""
    target = next(iter(_originals(conversation_id).filter(id=message_id)), None)
    if target is None:
        raise BadReference(f"no message {ref_of(message_id)} in this conversation")
    before = max(0, min(EXPAND_MAX_NEIGHBOURS, int(before)))
    after = max(0, min(EXPAND_MAX_NEIGHBOURS, int(after)))
    earlier = list(_originals(conversation_id).filter(id__lt=message_id).order_by("-id")[:before]) if before else []
    later = list(_originals(conversation_id).filter(id__gt=message_id).order_by("id")[:after]) if after else []
    return [*reversed(earlier), target, *later]


def expand(*, conversation_id, ref, before: int = 2, after: int = 2) -> dict:
    """The verbatim originals around ``ref`` for the agent, at most 16,000 characters: the
    referenced message first gets up to 6,000, then its neighbours, nearest first."""
    message_id = parse_ref(ref)
    rows = neighbourhood(conversation_id=conversation_id, message_id=message_id, before=before, after=after)
    texts = {m.id: message_text(m.role, m.content, m.tool_calls, m.name) for m in rows}
    centre = next(i for i, m in enumerate(rows) if m.id == message_id)
    order = sorted(range(len(rows)), key=lambda i: (abs(i - centre), i))
    room = EXPAND_TOTAL_MAX_CHARS
    shown: dict[int, str] = {}
    cut: dict[int, int] = {}
    for i in order:
        text = texts[rows[i].id]
        allowance = min(EXPAND_MESSAGE_MAX_CHARS, room)
        if allowance <= 0:
            break
        shown[i] = text[:allowance]
        cut[i] = max(0, len(text) - allowance)
        room -= len(shown[i])
    messages = []
    for i, m in enumerate(rows):
        if i not in shown:
            continue
        item = {"ref": ref_of(m.id), "role": m.role, "text": shown[i]}
        if m.name:
            item["name"] = m.name
        if cut[i]:
            item["omitted_chars"] = cut[i]
        messages.append(item)
    return {"ref": ref_of(message_id), "messages": messages}


# References of the live context ----------------------------------------------------------------

def _same_message(a: Message, b: Message) -> bool:
    if a.role == "tool" and a.tool_call_id:
        return a.tool_call_id == b.tool_call_id  # pruning may have shortened the copy's content
    if a.tool_calls:
        ids = [c.get("id") for c in tool_calls_of({"tool_calls": a.tool_calls})]
        return ids == [c.get("id") for c in tool_calls_of({"tool_calls": b.tool_calls})]
    return a.content == b.content


def _original_of(copy: Message) -> int | None:
    candidates = _originals(copy.conversation_id).filter(role=copy.role, id__lt=copy.id)
    if copy.role == "tool" and copy.tool_call_id:
        candidates = candidates.filter(tool_call_id=copy.tool_call_id)
    for candidate in candidates.order_by("-id")[:ORIGINAL_LOOKBACK]:
        if _same_message(copy, candidate):
            return candidate.id
    return None


def context_refs(session: Session) -> list[tuple[str, str | None]]:
    """``(role, reference)`` of each message of the session's live context, in ``seq`` order (the
    order of ``context_messages`` after the system prompt); a summary has no reference, a copy
    carried from an earlier context has its original's (None when it cannot be found)."""
    out: list[tuple[str, str | None]] = []
    for row in session.messages.filter(archived=False).order_by("seq"):
        if row.is_summary:
            out.append((row.role, None))
        elif row.visible:
            out.append((row.role, ref_of(row.id)))
        else:
            original = _original_of(row)
            out.append((row.role, ref_of(original) if original else None))
    return out


class SessionRecall:
    """What a context engine is handed: search, expand, suggestions and the live context's
    references for one conversation's active session (the engine stays free of the database)."""

    def __init__(self, *, conversation_id, session_id: int) -> None:
        self.conversation_id = conversation_id
        self.session_id = session_id

    def search(self, query: str, limit: int = 5) -> list[dict]:
        hits = search(conversation_id=self.conversation_id, query=query, limit=limit, compacted_only=True)
        return [{"ref": h.ref, "role": h.role, "snippet": h.snippet} for h in hits]

    def suggest(self, query: str, limit: int = 8) -> list[str]:
        """Words of the compacted history spelled close to the query's (``suggest_terms``)."""
        return suggest_terms(conversation_id=self.conversation_id, query=query, limit=limit, compacted_only=True)

    def expand(self, ref, before: int = 2, after: int = 2) -> dict:
        return expand(conversation_id=self.conversation_id, ref=ref, before=before, after=after)

    def context_refs(self) -> list[tuple[str, str | None]]:
        return context_refs(Session.objects.get(id=self.session_id))


def recall_for(*, conversation_id, session_id: int) -> SessionRecall:
    return SessionRecall(conversation_id=conversation_id, session_id=session_id)


def highlight_html(text: str, terms: Iterable[str]) -> str:
    """``text`` escaped for HTML with every occurrence of a search term (case-insensitive) in <mark>."""
    words = sorted({t for t in terms if t}, key=len, reverse=True)
    if not words:
        return html.escape(text)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.I)
    out, last = [], 0
    for match in pattern.finditer(text):
        out.append(html.escape(text[last:match.start()]))
        out.append(f"<mark>{html.escape(match.group(0))}</mark>")
        last = match.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


# Across a user's conversations -----------------------------------------------------------------

@dataclass(frozen=True)
class OwnerHit(Hit):
    conversation_id: object = None
    replaced: bool = False  # archived by a regenerate or an edit rather than by a compaction


def search_owner(*, owner_id: int, query: str, limit: int = SEARCH_MAX_LIMIT) -> list[OwnerHit]:
    """The originals of one user's conversations holding every word of ``query`` (archived and
    compacted ones included), best first. Only that user's conversations are read."""
    backend = BACKENDS.get(connection.vendor)
    if backend is None:
        raise RecallUnavailable(f"full-text search needs SQLite or PostgreSQL (this database is {connection.vendor})")
    terms = search_terms(query)
    if not terms:
        return []
    index_ensure()
    rows = backend.owner_ranked(owner_id, terms, max(1, min(SEARCH_MAX_LIMIT, int(limit))))
    return [OwnerHit(id=message_id, role=role, name=name, marked=marked, score=score, created_at=None,
                     compacted=compacted, conversation_id=conversation_id, replaced=replaced)
            for message_id, score, marked, conversation_id, role, name, compacted, replaced in rows]
