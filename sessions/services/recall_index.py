"""The message search index of migration 0005 on each backend: keeping its objects in place, and
the two queries a search is made of (``counts``: how common each word is in a conversation,
capped; ``ranked``: the messages holding every one of some words, best first, with a snippet),
and ``owner_ranked``, the same across every conversation of one user. ``BACKENDS`` joins them, per
backend, to the suggestion queries of the word list of migration 0011 (``recall_words``:
``vocabulary``, ``texts``, ``matching_texts``), whose names are re-exported here with the SQL
pieces both share (``recall_sql``).

SQLite drops a table's triggers whenever a later migration rebuilds the message table (Django's
"remake" for most field changes), so ``index_ensure`` checks the index objects once per process
before the first search, and after every ``migrate`` (``index_ensure_after_migrate``, a
post_migrate receiver); missing ones are rebuilt from the migration's own statements, re-reading
every message, so nothing stored meanwhile is missed. The word list's triggers are kept the same way
(``words_ensure``, before the first suggestion of a process and after every ``migrate``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from django.db import connection, connections, transaction
from django.db.migrations.recorder import MigrationRecorder

from sessions.models import Conversation, Message, Session
from sessions.services.recall_sql import FTS_TABLE as FTS_TABLE
from sessions.services.recall_sql import INDEXED_CHARS as INDEXED_CHARS
from sessions.services.recall_sql import _compacted as _compacted
from sessions.services.recall_sql import _db_conversation_id as _db_conversation_id
from sessions.services.recall_sql import _fts_match as _fts_match
from sessions.services.recall_sql import _fts_phrase as _fts_phrase
from sessions.services.recall_sql import _pg_query as _pg_query
from sessions.services.recall_words import SUGGEST_MIN_SIMILARITY as SUGGEST_MIN_SIMILARITY
from sessions.services.recall_words import TRGM_THRESHOLD as TRGM_THRESHOLD
from sessions.services.recall_words import VOCABULARY_CAP as VOCABULARY_CAP
from sessions.services.recall_words import WORDS_MIGRATION as WORDS_MIGRATION
from sessions.services.recall_words import Vocabulary as Vocabulary
from sessions.services.recall_words import _fragments as _fragments
from sessions.services.recall_words import _later_trigrams as _later_trigrams
from sessions.services.recall_words import _postgres_matching_texts as _postgres_matching_texts
from sessions.services.recall_words import _postgres_texts as _postgres_texts
from sessions.services.recall_words import _postgres_vocabulary as _postgres_vocabulary
from sessions.services.recall_words import _sqlite_matching_texts as _sqlite_matching_texts
from sessions.services.recall_words import _sqlite_texts as _sqlite_texts
from sessions.services.recall_words import _sqlite_vocabulary as _sqlite_vocabulary
from sessions.services.recall_words import _trgm as _trgm
from sessions.services.recall_words import _trgm_check as _trgm_check
from sessions.services.recall_words import _words_ensured as _words_ensured
from sessions.services.recall_words import _words_migration as _words_migration
from sessions.services.recall_words import logger as logger
from sessions.services.recall_words import words_ensure as words_ensure
from sessions.services.recall_words import words_present as words_present

SNIPPET_TOKENS = 64  # FTS5's largest snippet: a path or an error line survives whole
COUNT_CAP = 1_000  # "common" from here on: the count only orders the words, rarest first
MARK_START, MARK_END = "\ue000", "\ue001"  # private-use characters: never in a message's text

Ranked = list[tuple[int, float, str]]  # (message id, score: higher is better, marked snippet)


class RecallUnavailable(Exception):
    """The database has no full-text index (a backend other than SQLite or PostgreSQL)."""


# The index objects ------------------------------------------------------------------------------

_ensured: set[str] = set()  # connection aliases whose index objects were checked in this process


def _index_migration():
    return importlib.import_module("sessions.migrations.0005_message_search")


def index_present(using: str = "default") -> bool:
    """Whether the index objects of migration 0005 exist on this database."""
    conn = connections[using]
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            names = [f"{FTS_TABLE}_{s}" for s in ("ai", "au", "ad")]
            cursor.execute("SELECT count(*) FROM sqlite_master WHERE (type = 'trigger' AND name IN (%s, %s, %s)) "
                           "OR (type = 'table' AND name = %s)", [*names, FTS_TABLE])
            return cursor.fetchone()[0] == 4
        if conn.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() "
                           "AND table_name = %s AND column_name = 'search_vector'", [Message._meta.db_table])
            return cursor.fetchone()[0] == 1
    return True  # another backend has no index to keep


def index_ensure(using: str = "default", *, force: bool = False) -> bool:
    """Rebuild the index objects if any is missing (once per process, unless ``force``); True when
    they were rebuilt."""
    if using in _ensured and not force:
        return False
    conn = connections[using]
    statements = _index_migration().STATEMENTS.get(conn.vendor)
    rebuilt = False
    if statements is not None:
        with transaction.atomic(using=using):
            if conn.vendor == "postgresql":
                with conn.cursor() as cursor:  # one rebuilder at a time
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [FTS_TABLE])
            if not index_present(using):
                forward, reverse = statements
                with conn.cursor() as cursor:
                    if conn.vendor == "postgresql":
                        # ALTER TABLE refuses to run while the transaction has deferred foreign-key
                        # checks pending (messages written earlier in it): run them now.
                        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    for sql in [*reverse, *forward]:
                        cursor.execute(sql)
                rebuilt = True
    _ensured.add(using)
    return rebuilt


def index_ensure_after_migrate(sender=None, using: str = "default", **kwargs) -> None:
    """post_migrate receiver: a migration after 0005 (or 0011) may have dropped the SQLite triggers."""
    applied = MigrationRecorder(connections[using]).applied_migrations()
    if ("agent_sessions", "0005_message_search") in applied:
        index_ensure(using, force=True)
    if ("agent_sessions", WORDS_MIGRATION) in applied:
        words_ensure(using, force=True)


# The queries ------------------------------------------------------------------------------------

def _excluding(exclude: Sequence[int]) -> tuple[str, list[int]]:
    if not exclude:
        return "", []
    return f" AND m.id NOT IN ({', '.join(['%s'] * len(exclude))})", list(exclude)


def _sqlite_counts(conversation_id, terms: Sequence[str]) -> list[int]:
    one = f"(SELECT count(*) FROM (SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s LIMIT {COUNT_CAP}))"
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join([one] * len(terms)), [_fts_match(conversation_id, [t]) for t in terms])
        return list(cursor.fetchone())


def _sqlite_ranked(conversation_id, terms: Sequence[str], context: Sequence[str], limit: int,
                   exclude: Sequence[int], compacted_only: bool) -> Ranked:
    not_in, ids = _excluding(exclude)
    sql = (
        f"SELECT {FTS_TABLE}.rowid, bm25({FTS_TABLE}, 1.0, 0.0) AS score, "
        f"snippet({FTS_TABLE}, 0, %s, %s, '…', {SNIPPET_TOKENS}) "
        f"FROM {FTS_TABLE} JOIN {Message._meta.db_table} AS m ON m.id = {FTS_TABLE}.rowid "
        f"JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"WHERE {FTS_TABLE} MATCH %s AND NOT m.is_summary AND m.visible{_compacted(compacted_only)}{not_in} "
        "ORDER BY score, m.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [MARK_START, MARK_END, _fts_match(conversation_id, terms, context), *ids, limit])
        # bm25 is lower for better matches; callers read higher as better.
        return [(row[0], -float(row[1]), row[2] or "") for row in cursor.fetchall()]


# ts_headline's parser takes `<...>` for an HTML tag and leaves it out of the excerpt, which would
# turn `List<String>` into `List`. Every `<` goes to the headline as a private-use character and
# comes back after (a message holding that character itself shows `<` there in an excerpt).
_ANGLE_STAND_IN = "\ue002"  # beside the marks (\ue000, \ue001), never one of them


def _pg_headline(text_sql: str, query_sql: str) -> str:
    """SQL for the headline of ``text_sql`` on ``query_sql``, its options a parameter; `<` kept."""
    return (f"replace(ts_headline('english', replace({text_sql}, '<', '{_ANGLE_STAND_IN}'), {query_sql}, %s), "
            f"'{_ANGLE_STAND_IN}', '<')")


_HEADLINE_OPTIONS = (f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=60, MinWords=30, ShortWord=2, "
                     "MaxFragments=1, FragmentDelimiter=\" … \"")


def _postgres_counts(conversation_id, terms: Sequence[str]) -> list[int]:
    one = (f"(SELECT count(*) FROM (SELECT 1 FROM {Message._meta.db_table} WHERE conversation_id = %s "
           f"AND search_vector @@ {_pg_query(['x'])} LIMIT {COUNT_CAP}) AS hits)")
    params: list = []
    for term in terms:
        params += [_db_conversation_id(conversation_id), term]
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join([one] * len(terms)), params)
        return list(cursor.fetchone())


def _postgres_ranked(conversation_id, terms: Sequence[str], context: Sequence[str], limit: int,
                     exclude: Sequence[int], compacted_only: bool) -> Ranked:
    """Messages holding every one of ``terms``, ranked and headlined on all of ``context``."""
    not_in, ids = _excluding(exclude)
    every = list(dict.fromkeys([*terms, *context]))
    sql = (
        "SELECT top.id, top.score, "
        + _pg_headline(f"left(agent_sessions_message_text(top.content, top.tool_calls, top.name), {INDEXED_CHARS})",
                       "top.a") + " "
        "FROM (SELECT m.id, m.content, m.tool_calls, m.name, q.a, ts_rank_cd(m.search_vector, q.a, 1) AS score "
        f"FROM {Message._meta.db_table} AS m JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id, "
        f"(SELECT ({_pg_query(terms)}) AS q, ({_pg_query(every, '||')}) AS a) AS q "
        f"WHERE m.conversation_id = %s AND m.search_vector @@ q.q AND NOT m.is_summary"
        f"{_compacted(compacted_only)}{not_in} "
        "ORDER BY score DESC, m.id DESC LIMIT %s) AS top ORDER BY top.score DESC, top.id DESC"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_HEADLINE_OPTIONS, *terms, *every, _db_conversation_id(conversation_id), *ids, limit])
        return [(row[0], float(row[1]), row[2] or "") for row in cursor.fetchall()]


# Across one user's conversations (the sidebar's search) ---------------------------------------

OWNER_SNIPPET_TOKENS = 24  # an excerpt a sidebar row can show
# (message id, score: higher is better, marked snippet, conversation id, role, name, compacted, replaced)
OwnerRanked = list[tuple[int, float, str, object, str, str, bool, bool]]


def _owner_row(row) -> tuple:
    field = Message._meta.get_field("conversation").target_field
    return (row[0], float(row[1]), row[2] or "", field.to_python(row[3]), row[4], row[5], bool(row[6]), bool(row[7]))


def _sqlite_owner_ranked(owner_id: int, terms: Sequence[str], limit: int) -> OwnerRanked:
    """Originals of the owner's conversations holding every one of ``terms``, best first."""
    match = "body : (" + " AND ".join(_fts_phrase(t) for t in terms) + ")"
    sql = (
        f"SELECT {FTS_TABLE}.rowid, bm25({FTS_TABLE}, 1.0, 0.0) AS score, "
        f"snippet({FTS_TABLE}, 0, %s, %s, '…', {OWNER_SNIPPET_TOKENS}), m.conversation_id, m.role, m.name, "
        "(m.archived OR ss.ended_at IS NOT NULL), m.replaced "
        f"FROM {FTS_TABLE} JOIN {Message._meta.db_table} AS m ON m.id = {FTS_TABLE}.rowid "
        f"JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"JOIN {Conversation._meta.db_table} AS c ON c.id = m.conversation_id "
        f"WHERE {FTS_TABLE} MATCH %s AND c.owner_id = %s AND NOT m.is_summary AND m.visible "
        "ORDER BY score, m.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [MARK_START, MARK_END, match, owner_id, limit])
        return [_owner_row((row[0], -float(row[1]), *row[2:])) for row in cursor.fetchall()]


_OWNER_HEADLINE_OPTIONS = (f"StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=24, MinWords=10, ShortWord=2, "
                           "MaxFragments=1, FragmentDelimiter=\" … \"")


def _postgres_owner_ranked(owner_id: int, terms: Sequence[str], limit: int) -> OwnerRanked:
    sql = (
        "SELECT top.id, top.score, "
        + _pg_headline(f"left(agent_sessions_message_text(top.content, top.tool_calls, top.name), {INDEXED_CHARS})",
                       "top.q") + ", "
        "top.conversation_id, top.role, top.name, top.compacted, top.replaced "
        "FROM (SELECT m.id, m.content, m.tool_calls, m.name, m.conversation_id, m.role, m.replaced, q.q, "
        "(m.archived OR ss.ended_at IS NOT NULL) AS compacted, ts_rank_cd(m.search_vector, q.q, 1) AS score "
        f"FROM {Message._meta.db_table} AS m JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"JOIN {Conversation._meta.db_table} AS c ON c.id = m.conversation_id, "
        f"(SELECT ({_pg_query(terms)}) AS q) AS q "
        "WHERE c.owner_id = %s AND m.search_vector @@ q.q AND NOT m.is_summary "
        "ORDER BY score DESC, m.id DESC LIMIT %s) AS top ORDER BY top.score DESC, top.id DESC"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_OWNER_HEADLINE_OPTIONS, *terms, owner_id, limit])
        return [_owner_row(row) for row in cursor.fetchall()]


@dataclass(frozen=True)
class Backend:
    counts: Callable[..., list[int]]  # (conversation_id, terms): each term's count, capped, in one query
    ranked: Callable[..., Ranked]
    owner_ranked: Callable[..., OwnerRanked]  # (owner_id, terms, limit): across the owner's conversations
    vocabulary: Callable[..., Vocabulary]  # (conversation_id, query_words): candidates near them, a superset
    texts: Callable[..., dict[int, str]]  # (conversation_id, ids, compacted_only): the searchable ones' text
    matching_texts: Callable[..., list[str]]  # (conversation_id, word, compacted_only, limit, since): newest first


BACKENDS = {"sqlite": Backend(counts=_sqlite_counts, ranked=_sqlite_ranked, owner_ranked=_sqlite_owner_ranked,
                              vocabulary=_sqlite_vocabulary, texts=_sqlite_texts,
                              matching_texts=_sqlite_matching_texts),
            "postgresql": Backend(counts=_postgres_counts, ranked=_postgres_ranked, owner_ranked=_postgres_owner_ranked,
                                  vocabulary=_postgres_vocabulary, texts=_postgres_texts,
                                  matching_texts=_postgres_matching_texts)}
