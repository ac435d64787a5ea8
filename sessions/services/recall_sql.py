"""The pieces of SQL that the search queries (``recall_index``) and the word list's queries
(``recall_words``) share: the index's table name and how much of a message it holds, and the
filters every query repeats (the conversation, compacted messages only, a phrase of FTS5, a
PostgreSQL tsquery).

A query's words reach the database only as parameters or as FTS5 phrases quoted here, never as
syntax; a conversation id is handed over as its column stores it.
"""
from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from sessions.models import Message

FTS_TABLE = "agent_sessions_message_search"
INDEXED_CHARS = 200_000  # as migration 0005 indexes: the headline reads the same text


def _db_conversation_id(conversation_id):
    field = Message._meta.get_field("conversation").target_field
    return field.get_db_prep_value(field.to_python(conversation_id), connection)


def _compacted(compacted_only: bool) -> str:
    return " AND (m.archived OR ss.ended_at IS NOT NULL)" if compacted_only else ""


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _fts_match(conversation_id, terms: Sequence[str], context: Sequence[str] = ()) -> str:
    """Messages holding every one of ``terms``; ``context`` (words that need not match) only adds
    phrases for bm25 and the snippet, so both still favour the rest of the query's words."""
    words = " AND ".join(_fts_phrase(t) for t in terms)
    extra = [t for t in context if t not in terms]
    if extra:
        words = f"{words} AND ({' OR '.join(_fts_phrase(t) for t in [*terms, *extra])})"
    # The conversation's token first: FTS5 then reads only this conversation's postings.
    return f'conv : "c{_db_conversation_id(conversation_id)}" AND body : ({words})'


def _pg_query(terms: Sequence[str], op: str = "&&") -> str:
    return f" {op} ".join(["plainto_tsquery('english', %s)"] * len(terms))
