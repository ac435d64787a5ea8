"""Each conversation's vocabulary, for search suggestions (``recall.suggest_terms``): the distinct
words of its visible messages, lower-cased and unstemmed, in ``agent_sessions_conversation_word``
(conversation id, word, ``first_id``: the oldest message holding it), kept by the database itself:

- SQLite: triggers on the message table hand the message's text (migration 0005's) to a
  contentless FTS5 scratch table tokenised like the search index without the stemmer, copy the
  terms its ``fts5vocab`` table lists, and empty it again; a trigger on the word list files each
  new word under its trigrams (``agent_sessions_conversation_trigram``, with the word's count of
  distinct trigrams; all but the word-initial `  x`, which the caller counts itself; the
  conversation by a small integer key of ``agent_sessions_conversation_word_key``), so the words
  near a query's are found, and their similarity bounded, by index;
- PostgreSQL: a trigger adds the lexemes of ``to_tsvector('simple', text)`` (the search's parser,
  no stemming); ``pg_trgm`` is installed when the server allows it (a trusted extension since
  PostgreSQL 13) and indexes the words by trigram; without it the similarity is computed in
  Python over the words holding a fragment of the query's.

Every message holding a word has an id of at least its ``first_id`` (a message's words are taken
when it is inserted, and again, lowering ``first_id`` if need be, when its text changes). The list
only grows while a conversation lives: a word of an edited or deleted message stays until the
conversation is deleted, and a suggestion is checked against the messages before it is given.
Words shorter than 3 or longer than 64 characters are not kept. Unapplying this migration leaves
``pg_trgm`` installed (other objects may use it).
"""

import importlib
import logging

from django.db import DatabaseError, migrations, transaction

logger = logging.getLogger("sessions.services.recall")

WORDS_TABLE = "agent_sessions_conversation_word"
MIN_WORD_CHARS, MAX_WORD_CHARS = 3, 64

_search = importlib.import_module("sessions.migrations.0005_message_search")

# --- SQLite --------------------------------------------------------------------------------------

SCRATCH = "agent_sessions_word_scratch"
TRIGRAMS_TABLE = "agent_sessions_conversation_trigram"
KEYS_TABLE = "agent_sessions_conversation_word_key"  # a third of the trigram table's size: no uuid on each row
_KEEP = f"length(term) BETWEEN {MIN_WORD_CHARS} AND {MAX_WORD_CHARS}"


def _take_words(keep_oldest: str) -> str:
    """The trigger body filing NEW's words; ``keep_oldest`` is the conflict clause for a known word."""
    return " ".join([
        f"INSERT INTO {SCRATCH}(rowid, body) VALUES (NEW.id, {_search._sqlite_text('NEW')});",
        f"INSERT INTO {WORDS_TABLE}(conversation_id, word, first_id) SELECT NEW.conversation_id, term, NEW.id "
        f"FROM {SCRATCH}_terms WHERE {_KEEP} {keep_oldest};",
        f"INSERT INTO {SCRATCH}({SCRATCH}) VALUES ('delete-all');",
    ])


def _text_changed(distinct: str) -> str:
    """A save() that writes every column changes no word: only a real change is read again."""
    columns = ("content", "tool_calls", "name", "visible", "conversation_id")
    return "(" + " OR ".join(f"OLD.{c} {distinct} NEW.{c}" for c in columns) + ")"


_LOWER_FIRST_ID = "ON CONFLICT (conversation_id, word) DO UPDATE SET first_id = min(first_id, excluded.first_id)"


def _positions(first: int) -> str:
    """Positions of a word's trigrams in "  word " from ``first`` on, as a JSON array (the word's own
    length cuts it short)."""
    return "[" + ", ".join(str(i) for i in range(first, MAX_WORD_CHARS + 2)) + "]"


# Never dropped by a table remake: created once (IF NOT EXISTS keeps a rebuild idempotent).
SQLITE_TABLES = [
    f"""CREATE TABLE IF NOT EXISTS {WORDS_TABLE} (conversation_id char(32) NOT NULL, word text NOT NULL,
        first_id integer NOT NULL, PRIMARY KEY (conversation_id, word)) WITHOUT ROWID""",
    f"CREATE TABLE IF NOT EXISTS {KEYS_TABLE} (key integer PRIMARY KEY, conversation_id char(32) NOT NULL UNIQUE)",
    f"""CREATE TABLE IF NOT EXISTS {TRIGRAMS_TABLE} (conversation_key integer NOT NULL, trigram text NOT NULL,
        word text NOT NULL, size integer NOT NULL, PRIMARY KEY (conversation_key, trigram, word)) WITHOUT ROWID""",
    f"""CREATE TRIGGER IF NOT EXISTS {WORDS_TABLE}_trigrams AFTER INSERT ON {WORDS_TABLE} BEGIN
        INSERT OR IGNORE INTO {KEYS_TABLE}(conversation_id) VALUES (NEW.conversation_id);
        INSERT OR IGNORE INTO {TRIGRAMS_TABLE}(conversation_key, trigram, word, size)
            SELECT k.key, substr('  ' || NEW.word || ' ', p.value, 3), NEW.word,
                (SELECT count(DISTINCT substr('  ' || NEW.word || ' ', a.value, 3))
                 FROM json_each('{_positions(1)}') AS a WHERE a.value <= length(NEW.word) + 1)
            FROM {KEYS_TABLE} AS k, json_each('{_positions(2)}') AS p
            WHERE k.conversation_id = NEW.conversation_id AND p.value <= length(NEW.word) + 1;
    END""",
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS {SCRATCH} USING fts5(body, content = '', detail = none,
        tokenize = 'unicode61 remove_diacritics 2')""",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {SCRATCH}_terms USING fts5vocab({SCRATCH}, 'row')",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {SCRATCH}_docs USING fts5vocab({SCRATCH}, 'instance')",
]

SQLITE_TRIGGER_NAMES = [f"{WORDS_TABLE}_ai", f"{WORDS_TABLE}_au", f"{WORDS_TABLE}_cd"]

# Dropped whenever Django rebuilds the message or the conversation table. A new message has the
# largest id yet, so its words keep their first_id; a changed one may lower it.
SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER {WORDS_TABLE}_ai AFTER INSERT ON agent_sessions_message WHEN NEW.visible BEGIN
        {_take_words("ON CONFLICT DO NOTHING")}
    END""",
    f"""CREATE TRIGGER {WORDS_TABLE}_au AFTER UPDATE OF content, tool_calls, name, visible, conversation_id
        ON agent_sessions_message WHEN NEW.visible AND {_text_changed('IS NOT')} BEGIN
        {_take_words(_LOWER_FIRST_ID)}
    END""",
    f"""CREATE TRIGGER {WORDS_TABLE}_cd AFTER DELETE ON agent_sessions_conversation BEGIN
        DELETE FROM {WORDS_TABLE} WHERE conversation_id = OLD.id;
        DELETE FROM {TRIGRAMS_TABLE}
            WHERE conversation_key IN (SELECT key FROM {KEYS_TABLE} WHERE conversation_id = OLD.id);
        DELETE FROM {KEYS_TABLE} WHERE conversation_id = OLD.id;
    END""",
]

# Every stored message's words at once (a rebuild re-reads them all, so nothing stored while the
# triggers were missing is left out).
SQLITE_HARVEST = [
    f"INSERT INTO {SCRATCH}({SCRATCH}) VALUES ('delete-all')",
    f"INSERT INTO {SCRATCH}(rowid, body) SELECT m.id, {_search._sqlite_text('m')} FROM agent_sessions_message AS m "
    "WHERE m.visible",
    f"""INSERT INTO {WORDS_TABLE}(conversation_id, word, first_id)
        SELECT m.conversation_id, d.term, min(m.id) FROM {SCRATCH}_docs AS d
        JOIN agent_sessions_message AS m ON m.id = d.doc WHERE {_KEEP.replace('term', 'd.term')}
        GROUP BY m.conversation_id, d.term {_LOWER_FIRST_ID}""",
    f"INSERT INTO {SCRATCH}({SCRATCH}) VALUES ('delete-all')",
]

SQLITE_REVERSE = [
    *(f"DROP TRIGGER IF EXISTS {name}" for name in SQLITE_TRIGGER_NAMES),
    f"DROP TABLE IF EXISTS {SCRATCH}_docs",
    f"DROP TABLE IF EXISTS {SCRATCH}_terms",
    f"DROP TABLE IF EXISTS {SCRATCH}",
    f"DROP TABLE IF EXISTS {TRIGRAMS_TABLE}",
    f"DROP TABLE IF EXISTS {KEYS_TABLE}",
    f"DROP TABLE IF EXISTS {WORDS_TABLE}",
]

# --- PostgreSQL ----------------------------------------------------------------------------------

_PG_WORDS = (
    "unnest(tsvector_to_array(to_tsvector('simple'::regconfig, "
    "left(agent_sessions_message_text({row}.content, {row}.tool_calls, {row}.name), {chars}))))"
)


def _pg_words(row: str) -> str:
    return _PG_WORDS.format(row=row, chars=_search.INDEXED_CHARS)


POSTGRES_TABLES = [
    f"""CREATE TABLE IF NOT EXISTS {WORDS_TABLE} (conversation_id uuid NOT NULL, word text NOT NULL,
        first_id bigint NOT NULL, PRIMARY KEY (conversation_id, word))""",
    # plpgsql: its body is bound when it runs, so 0005's rebuild may drop and re-create the text
    # function. A new message has the largest id yet, so its words keep their first_id (no row is
    # locked for a known word); a changed one may lower it.
    f"""CREATE OR REPLACE FUNCTION {WORDS_TABLE}_take() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NOT NEW.visible THEN
            RETURN NULL;
        END IF;
        IF TG_OP = 'INSERT' THEN
            INSERT INTO {WORDS_TABLE} AS k (conversation_id, word, first_id)
            SELECT NEW.conversation_id, w, NEW.id FROM {_pg_words('NEW')} AS w
            WHERE length(w) BETWEEN {MIN_WORD_CHARS} AND {MAX_WORD_CHARS} ORDER BY w
            ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO {WORDS_TABLE} AS k (conversation_id, word, first_id)
            SELECT NEW.conversation_id, w, NEW.id FROM {_pg_words('NEW')} AS w
            WHERE length(w) BETWEEN {MIN_WORD_CHARS} AND {MAX_WORD_CHARS} ORDER BY w
            ON CONFLICT (conversation_id, word) DO UPDATE SET first_id = EXCLUDED.first_id
            WHERE EXCLUDED.first_id < k.first_id;
        END IF;
        RETURN NULL;
    END $$""",
    f"""CREATE OR REPLACE FUNCTION {WORDS_TABLE}_forget() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        DELETE FROM {WORDS_TABLE} WHERE conversation_id = OLD.id;
        RETURN NULL;
    END $$""",
]

POSTGRES_TRIGGER_NAMES = [f"{WORDS_TABLE}_ai", f"{WORDS_TABLE}_au", f"{WORDS_TABLE}_cd"]

POSTGRES_TRIGGERS = [
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_ai ON agent_sessions_message",
    f"""CREATE TRIGGER {WORDS_TABLE}_ai AFTER INSERT ON agent_sessions_message
        FOR EACH ROW EXECUTE FUNCTION {WORDS_TABLE}_take()""",
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_au ON agent_sessions_message",
    f"""CREATE TRIGGER {WORDS_TABLE}_au AFTER UPDATE OF content, tool_calls, name, visible, conversation_id
        ON agent_sessions_message FOR EACH ROW WHEN ({_text_changed('IS DISTINCT FROM')})
        EXECUTE FUNCTION {WORDS_TABLE}_take()""",
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_cd ON agent_sessions_conversation",
    f"""CREATE TRIGGER {WORDS_TABLE}_cd AFTER DELETE ON agent_sessions_conversation
        FOR EACH ROW EXECUTE FUNCTION {WORDS_TABLE}_forget()""",
]

POSTGRES_HARVEST = [
    f"""INSERT INTO {WORDS_TABLE} AS k (conversation_id, word, first_id)
        SELECT m.conversation_id, w, min(m.id) FROM agent_sessions_message AS m, {_pg_words('m')} AS w
        WHERE m.visible AND length(w) BETWEEN {MIN_WORD_CHARS} AND {MAX_WORD_CHARS} GROUP BY m.conversation_id, w
        ON CONFLICT (conversation_id, word) DO UPDATE SET first_id = EXCLUDED.first_id
        WHERE EXCLUDED.first_id < k.first_id""",
]

POSTGRES_TRGM = "CREATE EXTENSION IF NOT EXISTS pg_trgm"
POSTGRES_TRGM_INDEX_NAME = f"{WORDS_TABLE}_trgm"
# Without a pending list: a word list filled in bulk is searched at once, before any vacuum.
POSTGRES_TRGM_INDEX = (f"CREATE INDEX IF NOT EXISTS {POSTGRES_TRGM_INDEX_NAME} ON {WORDS_TABLE} "
                       "USING gin (word gin_trgm_ops) WITH (fastupdate = off)")

POSTGRES_REVERSE = [
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_ai ON agent_sessions_message",
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_au ON agent_sessions_message",
    f"DROP TRIGGER IF EXISTS {WORDS_TABLE}_cd ON agent_sessions_conversation",
    f"DROP FUNCTION IF EXISTS {WORDS_TABLE}_take()",
    f"DROP FUNCTION IF EXISTS {WORDS_TABLE}_forget()",
    f"DROP TABLE IF EXISTS {WORDS_TABLE}",
]

# (objects that survive a table remake, triggers, the re-reading of every message, reverse)
STATEMENTS = {
    "sqlite": (SQLITE_TABLES, [*(f"DROP TRIGGER IF EXISTS {n}" for n in SQLITE_TRIGGER_NAMES), *SQLITE_TRIGGERS],
               SQLITE_HARVEST, SQLITE_REVERSE),
    "postgresql": (POSTGRES_TABLES, POSTGRES_TRIGGERS, POSTGRES_HARVEST, POSTGRES_REVERSE),
}


def trgm_install(connection) -> bool:
    """Install ``pg_trgm`` and the words' trigram index if the server allows it; False (logged) when
    it does not, and suggestions compute the similarity in Python. Runs in a savepoint, so a refusal
    leaves the surrounding transaction usable."""
    try:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(POSTGRES_TRGM)
            cursor.execute(POSTGRES_TRGM_INDEX)
        return True
    except DatabaseError as exc:
        logger.warning("pg_trgm could not be installed (%s); word suggestions compute trigram similarity in Python",
                       str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return False


def build(connection) -> None:
    """Create every object (idempotent) and read every stored message's words."""
    tables, triggers, harvest, _reverse = STATEMENTS[connection.vendor]
    with connection.cursor() as cursor:
        for sql in [*tables, *triggers, *harvest]:
            cursor.execute(sql)
    if connection.vendor == "postgresql":
        trgm_install(connection)


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor in STATEMENTS:
        build(schema_editor.connection)


def backwards(apps, schema_editor) -> None:
    statements = STATEMENTS.get(schema_editor.connection.vendor)
    if statements is None:
        return
    with schema_editor.connection.cursor() as cursor:
        for sql in statements[3]:
            cursor.execute(sql)


class Migration(migrations.Migration):

    dependencies = [
        ("agent_sessions", "0010_attachments"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
