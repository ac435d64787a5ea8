"""Full-text index of every visible message, in the database's own engine, kept current by the
database itself (no Python write path changes):

- SQLite: an FTS5 table ``agent_sessions_message_search`` (rowid = message id; ``body`` the
  message's text, ``conv`` a token naming its conversation so a search reads one conversation's
  postings) maintained by AFTER INSERT/UPDATE/DELETE triggers on the message table;
- PostgreSQL: a generated, stored ``search_vector`` tsvector column with a GIN index.

The text of a message is its string content, or the ``text``/``content`` strings of its blocks
(tool results included, image data never), plus its tool calls' names and arguments and its tool
name; the first 200,000 characters are indexed (a PostgreSQL tsvector must stay under 1 MB).
Copies carried into a new context (``visible`` false) are not indexed: their originals are.
"""

from django.db import migrations

INDEXED_CHARS = 200_000

# --- SQLite --------------------------------------------------------------------------------------

SQLITE_TABLE = "agent_sessions_message_search"


def _sqlite_text(row: str) -> str:
    return (
        "substr(trim("
        f"coalesce(CASE WHEN json_type({row}.content) = 'text' THEN json_extract({row}.content, '$') END, '')"
        f" || ' ' || coalesce((SELECT group_concat(t.value, ' ') FROM json_tree({row}.content) AS t"
        "  WHERE t.type = 'text' AND t.key IN ('text', 'content')), '')"
        f" || ' ' || coalesce((SELECT group_concat(t.value, ' ') FROM json_tree({row}.tool_calls) AS t"
        "  WHERE t.type = 'text' AND t.key IN ('name', 'arguments')), '')"
        f" || ' ' || coalesce({row}.name, '')"
        f"), 1, {INDEXED_CHARS})"
    )


SQLITE_FORWARD = [
    f"CREATE VIRTUAL TABLE {SQLITE_TABLE} USING fts5(body, conv, tokenize = 'porter unicode61 remove_diacritics 2')",
    f"""CREATE TRIGGER {SQLITE_TABLE}_ai AFTER INSERT ON agent_sessions_message WHEN NEW.visible BEGIN
        INSERT INTO {SQLITE_TABLE}(rowid, body, conv) VALUES (NEW.id, {_sqlite_text('NEW')}, 'c' || NEW.conversation_id);
    END""",
    f"""CREATE TRIGGER {SQLITE_TABLE}_au AFTER UPDATE OF content, tool_calls, name, visible, conversation_id
        ON agent_sessions_message BEGIN
        DELETE FROM {SQLITE_TABLE} WHERE rowid = OLD.id;
        INSERT INTO {SQLITE_TABLE}(rowid, body, conv)
            SELECT NEW.id, {_sqlite_text('NEW')}, 'c' || NEW.conversation_id WHERE NEW.visible;
    END""",
    f"""CREATE TRIGGER {SQLITE_TABLE}_ad AFTER DELETE ON agent_sessions_message BEGIN
        DELETE FROM {SQLITE_TABLE} WHERE rowid = OLD.id;
    END""",
    f"""INSERT INTO {SQLITE_TABLE}(rowid, body, conv)
        SELECT m.id, {_sqlite_text('m')}, 'c' || m.conversation_id FROM agent_sessions_message AS m WHERE m.visible""",
]

SQLITE_REVERSE = [
    f"DROP TRIGGER IF EXISTS {SQLITE_TABLE}_ai",
    f"DROP TRIGGER IF EXISTS {SQLITE_TABLE}_au",
    f"DROP TRIGGER IF EXISTS {SQLITE_TABLE}_ad",
    f"DROP TABLE IF EXISTS {SQLITE_TABLE}",
]

# --- PostgreSQL ----------------------------------------------------------------------------------

# IMMUTABLE (it reads only its arguments), so a generated column may call it.
POSTGRES_FORWARD = [
    """CREATE OR REPLACE FUNCTION agent_sessions_message_text(content jsonb, tool_calls jsonb, name text)
        RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT concat_ws(' ',
            CASE WHEN jsonb_typeof(content) = 'string' THEN content #>> '{}' END,
            (SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(content, 'strict $.**.text', '{}', true) AS v
              WHERE jsonb_typeof(v) = 'string'),
            (SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(content, 'strict $.**.content', '{}', true) AS v
              WHERE jsonb_typeof(v) = 'string'),
            (SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(tool_calls, 'strict $.**.name', '{}', true) AS v
              WHERE jsonb_typeof(v) = 'string'),
            (SELECT string_agg(v #>> '{}', ' ')
               FROM jsonb_path_query(tool_calls, 'strict $.**.arguments', '{}', true) AS v
              WHERE jsonb_typeof(v) = 'string'),
            NULLIF(name, ''))
    $$""",
    f"""ALTER TABLE agent_sessions_message ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (
        CASE WHEN visible THEN to_tsvector('english'::regconfig,
            left(agent_sessions_message_text(content, tool_calls, name), {INDEXED_CHARS})) END) STORED""",
    "CREATE INDEX agent_sessions_message_search_gin ON agent_sessions_message USING gin (search_vector)",
]

POSTGRES_REVERSE = [
    "DROP INDEX IF EXISTS agent_sessions_message_search_gin",
    "ALTER TABLE agent_sessions_message DROP COLUMN IF EXISTS search_vector",
    "DROP FUNCTION IF EXISTS agent_sessions_message_text(jsonb, jsonb, text)",
]

STATEMENTS = {"sqlite": (SQLITE_FORWARD, SQLITE_REVERSE), "postgresql": (POSTGRES_FORWARD, POSTGRES_REVERSE)}


def _run(schema_editor, forward: bool) -> None:
    statements = STATEMENTS.get(schema_editor.connection.vendor)
    if statements is None:
        return  # another backend has no index; sessions.services.recall says so when asked to search
    for sql in statements[0 if forward else 1]:
        schema_editor.execute(sql, params=None)


def forwards(apps, schema_editor) -> None:
    _run(schema_editor, True)


def backwards(apps, schema_editor) -> None:
    _run(schema_editor, False)


class Migration(migrations.Migration):

    dependencies = [
        ("agent_sessions", "0004_compression_event_reading"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
