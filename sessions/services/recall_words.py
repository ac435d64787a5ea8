"""The conversation's word list of migration 0011, for suggestions: keeping its objects in place
(``words_ensure``), and the queries a suggestion is made of (``vocabulary``: the words of a
conversation that may be close in spelling to some query words; ``texts`` and ``matching_texts``:
the indexed text of the searchable messages that hold a word).

SQLite drops the word list's triggers whenever a later migration rebuilds the message table, as it
does the search index's, so ``words_ensure`` checks them once per process before the first
suggestion, and after every ``migrate`` (through ``recall_index.index_ensure_after_migrate``);
missing ones are rebuilt from the migration's own ``build``, re-reading every stored message. The
vocabulary is a superset: every word within ``SUGGEST_MIN_SIMILARITY`` of a query word is in it,
and the caller scores and cuts it; the texts are only ever of searchable originals.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence

from django.db import connection, connections, transaction

from sessions.models import Message, Session
from sessions.services.recall_sql import (
    FTS_TABLE,
    INDEXED_CHARS,
    _compacted,
    _db_conversation_id,
    _fts_match,
    _pg_query,
)

logger = logging.getLogger("sessions.services.recall")


# The word list (migration 0011) ----------------------------------------------------------------

WORDS_MIGRATION = "0011_conversation_words"
_words_ensured: set[str] = set()  # connection aliases whose word list objects were checked in this process
_trgm: dict[str, bool] = {}  # connection alias -> pg_trgm installed (PostgreSQL), checked once a process


def _words_migration():
    return importlib.import_module(f"sessions.migrations.{WORDS_MIGRATION}")


def words_present(using: str = "default") -> bool:
    """Whether the word list's tables, scratch tables and triggers of migration 0011 all exist."""
    conn = connections[using]
    migration = _words_migration()
    with conn.cursor() as cursor:
        if conn.vendor == "sqlite":
            tables = [migration.WORDS_TABLE, migration.TRIGRAMS_TABLE, migration.KEYS_TABLE, migration.SCRATCH,
                      f"{migration.SCRATCH}_terms", f"{migration.SCRATCH}_docs"]
            names = [*migration.SQLITE_TRIGGER_NAMES, f"{migration.WORDS_TABLE}_trigrams"]
            cursor.execute(f"SELECT count(*) FROM sqlite_master WHERE (type = 'table' AND name IN "
                           f"({', '.join(['%s'] * len(tables))})) OR (type = 'trigger' AND name IN "
                           f"({', '.join(['%s'] * len(names))}))", [*tables, *names])
            return cursor.fetchone()[0] == len(tables) + len(names)
        if conn.vendor == "postgresql":
            names = migration.POSTGRES_TRIGGER_NAMES
            cursor.execute(f"SELECT (SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal AND tgname IN "
                           f"({', '.join(['%s'] * len(names))})) + (to_regclass(%s) IS NOT NULL)::int",
                           [*names, migration.WORDS_TABLE])
            return cursor.fetchone()[0] == len(names) + 1
    return True


def words_ensure(using: str = "default", *, force: bool = False) -> bool:
    """Rebuild the word list's objects if any is missing (once per process, unless ``force``),
    re-reading every stored message; True when they were rebuilt. On PostgreSQL, also notes
    whether ``pg_trgm`` is installed (logged once when it is not) and adds its index if missing."""
    if using in _words_ensured and not force:
        return False
    conn = connections[using]
    migration = _words_migration()
    rebuilt = False
    if conn.vendor in migration.STATEMENTS:
        with transaction.atomic(using=using):
            if conn.vendor == "postgresql":
                with conn.cursor() as cursor:  # one rebuilder at a time
                    cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [migration.WORDS_TABLE])
            if not words_present(using):
                migration.build(conn)
                rebuilt = True
            if conn.vendor == "postgresql":
                _trgm[using] = _trgm_check(conn, migration)
    _words_ensured.add(using)
    return rebuilt


def _trgm_check(conn, migration) -> bool:
    with conn.cursor() as cursor:
        cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'), "
                       "EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = %s)", [migration.POSTGRES_TRGM_INDEX_NAME])
        installed, indexed = cursor.fetchone()
    if installed and not indexed:
        migration.trgm_install(conn)
    if not installed and _trgm.get(conn.alias) is not False:
        logger.warning("pg_trgm is not installed on this database: word suggestions compute trigram similarity in "
                       "Python, slower on a long conversation (CREATE EXTENSION pg_trgm, by a role allowed to, "
                       "then a restart gives them its index)")
    return bool(installed)


# Suggestions: the conversation's words near the query's, and the messages holding them --------

SUGGEST_MIN_SIMILARITY = 0.3  # pg_trgm's default `%` threshold
VOCABULARY_CAP = 200  # candidates the database hands on for each query word, most similar first
TRGM_THRESHOLD = 0.25  # pg_trgm's `%` cut, below the suggestions' own so rounding never loses a word
Vocabulary = list[tuple[str, int]]  # (word, first_id: no message holding it has a smaller id)


def _later_trigrams(word: str) -> set[str]:
    """The trigrams of a run of letters and digits in pg_trgm's padding ("  word "), less the first
    ("  w"), which SQLite's trigram table does not keep."""
    padded = f"  {word} "
    return {padded[i:i + 3] for i in range(1, len(padded) - 2)}


def _sqlite_vocabulary(conversation_id, query_words: Sequence[str]) -> Vocabulary:
    """For each query word, the conversation's words within ``SUGGEST_MIN_SIMILARITY`` of it (the
    ``VOCABULARY_CAP`` closest), through the trigram table: s shared trigrams (the first letter's
    counted apart), |Q| and |W| the words' trigram counts, similarity s / (|Q| + |W| - s)."""
    one = (
        "SELECT * FROM (SELECT t.word, w.first_id FROM (SELECT word, max(size) AS size, "
        "count(*) + (substr(word, 1, 1) = %s) AS shared "
        f"FROM {_words_migration().TRIGRAMS_TABLE} WHERE conversation_key = "
        f"(SELECT key FROM {_words_migration().KEYS_TABLE} WHERE conversation_id = %s) AND trigram IN ({{grams}}) "
        f"GROUP BY word) AS t JOIN {_words_migration().WORDS_TABLE} AS w ON w.conversation_id = %s AND w.word = t.word "
        "WHERE t.shared + 1e-9 >= %s * (%s + t.size - t.shared) "
        "ORDER BY t.shared * 1.0 / (%s + t.size - t.shared) DESC, t.word LIMIT %s)"
    )
    conversation = _db_conversation_id(conversation_id)
    parts, params = [], []
    for word in query_words:
        grams = sorted(_later_trigrams(word))
        size = len(grams) + 1
        parts.append(one.format(grams=", ".join(["%s"] * len(grams))))
        params += [word[0], conversation, *grams, conversation, SUGGEST_MIN_SIMILARITY, size, size, VOCABULARY_CAP]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ".join(parts), params)
        return [(row[0], row[1]) for row in cursor.fetchall()]


def _fragments(query_words: Sequence[str]) -> list[str]:
    """Three-letter runs, first two and last two letters of the query words: a word within
    similarity 0.3 of a query word of 3 or more letters shares at least two of its trigrams, so one
    besides the word-initial `  x`, and holds one of these (necessary, not sufficient)."""
    return sorted({g.strip() for w in query_words for g in _later_trigrams(w)})


def _postgres_vocabulary(conversation_id, query_words: Sequence[str]) -> Vocabulary:
    """With pg_trgm: for each query word, the conversation's ``VOCABULARY_CAP`` words most similar
    to it, within ``TRGM_THRESHOLD``, through the trigram index. Without it: the words holding a
    fragment of a query word (``_fragments``), scanned."""
    conversation = _db_conversation_id(conversation_id)
    table = _words_migration().WORDS_TABLE
    with transaction.atomic(), connection.cursor() as cursor:
        if _trgm.get(connection.alias):
            cursor.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)", [str(TRGM_THRESHOLD)])
            one = (f"(SELECT word, first_id FROM {table} WHERE conversation_id = %s AND word %% %s "
                   "ORDER BY similarity(word, %s) DESC, word LIMIT %s)")
            params: list = []
            for word in query_words:
                params += [conversation, word, word, VOCABULARY_CAP]
            cursor.execute(" UNION ".join([one] * len(query_words)), params)
        else:
            fragments = _fragments(query_words)
            held = " OR ".join(["strpos(word, %s) > 0"] * len(fragments))
            cursor.execute(f"SELECT word, first_id FROM {table} WHERE conversation_id = %s AND ({held})",
                           [conversation, *fragments])
        return [(row[0], row[1]) for row in cursor.fetchall()]


def _sqlite_texts(conversation_id, ids: Sequence[int], compacted_only: bool) -> dict[int, str]:
    """The indexed text of those of ``ids`` that are searchable originals of the conversation."""
    if not ids:
        return {}
    sql = (
        f"SELECT m.id, {FTS_TABLE}.body FROM {Message._meta.db_table} AS m "
        f"CROSS JOIN {FTS_TABLE} ON {FTS_TABLE}.rowid = m.id "
        f"JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"WHERE m.id IN ({', '.join(['%s'] * len(ids))}) AND m.conversation_id = %s AND NOT m.is_summary AND m.visible"
        f"{_compacted(compacted_only)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, _db_conversation_id(conversation_id)])
        return {row[0]: row[1] or "" for row in cursor.fetchall()}


def _postgres_texts(conversation_id, ids: Sequence[int], compacted_only: bool) -> dict[int, str]:
    if not ids:
        return {}
    sql = (
        f"SELECT m.id, left(agent_sessions_message_text(m.content, m.tool_calls, m.name), {INDEXED_CHARS}) "
        f"FROM {Message._meta.db_table} AS m JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"WHERE m.id IN ({', '.join(['%s'] * len(ids))}) AND m.conversation_id = %s AND NOT m.is_summary "
        f"AND m.search_vector IS NOT NULL{_compacted(compacted_only)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*ids, _db_conversation_id(conversation_id)])
        return {row[0]: row[1] or "" for row in cursor.fetchall()}


def _sqlite_matching_texts(conversation_id, word: str, compacted_only: bool, limit: int, since: int) -> list[str]:
    """The indexed text of the newest searchable originals from id ``since`` on that a search for
    ``word`` finds."""
    sql = (
        f"SELECT {FTS_TABLE}.body FROM {FTS_TABLE} JOIN {Message._meta.db_table} AS m ON m.id = {FTS_TABLE}.rowid "
        f"JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"WHERE {FTS_TABLE} MATCH %s AND {FTS_TABLE}.rowid >= %s AND NOT m.is_summary AND m.visible"
        f"{_compacted(compacted_only)} ORDER BY {FTS_TABLE}.rowid DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_fts_match(conversation_id, [word]), since, limit])
        return [row[0] or "" for row in cursor.fetchall()]


def _postgres_matching_texts(conversation_id, word: str, compacted_only: bool, limit: int, since: int) -> list[str]:
    sql = (
        f"SELECT left(agent_sessions_message_text(m.content, m.tool_calls, m.name), {INDEXED_CHARS}) "
        f"FROM {Message._meta.db_table} AS m JOIN {Session._meta.db_table} AS ss ON ss.id = m.session_id "
        f"WHERE m.conversation_id = %s AND m.id >= %s AND m.search_vector @@ {_pg_query([word])} AND NOT m.is_summary"
        f"{_compacted(compacted_only)} ORDER BY m.id DESC LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [_db_conversation_id(conversation_id), since, word, limit])
        return [row[0] or "" for row in cursor.fetchall()]
