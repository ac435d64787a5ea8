"""Search suggestions (``recall.suggest_terms``, ``SessionRecall.suggest``) on the tier's database
(SQLite by default, PostgreSQL when DATABASE_URL points at it): when the agent's words are not the
conversation's, the conversation's own words closest in spelling are offered, from the compacted
history only, never from another conversation."""
from __future__ import annotations

import logging

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sessions.models import Conversation, Message
from sessions.services import recall, recall_index
from sessions.services.context import message_append, session_active, session_start

from .test_recall_index import index_after_migrate  # noqa: F401  (module fixture: the index objects exist)

pytestmark = pytest.mark.django_db

WORDS_TABLE = "agent_sessions_conversation_word"


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice)
    session_start(conversation=c)
    return c


def say(conversation, content, role="user", **kw):
    return message_append(session=session_active(conversation), role=role, content=content, **kw)


def compact(conversation):
    """What a compaction leaves: every message so far archived out of the live context."""
    Message.objects.filter(conversation=conversation).update(archived=True)


def suggest(conversation, query, **kw):
    return recall.suggest_terms(conversation_id=conversation.id, query=query, **kw)


def reference(conversation, query, limit=8):
    """The suggestions worked out by hand from the compacted messages' text: every word within
    similarity 0.3 of a query word, best first, ties alphabetical."""
    sought, used = recall._suggestion_inputs(query)
    texts = [recall.message_text(m.role, m.content, m.tool_calls, m.name)
             for m in Message.objects.filter(conversation=conversation, archived=True, visible=True, is_summary=False)]
    words = {w.lower() for t in texts for w in recall._WORD.findall(t)}
    scored = []
    for word in words:
        if len(word) < 3 or word in used or word in recall._SUGGEST_STOPWORDS:
            continue
        score = max(recall.trigram_similarity(recall.trigrams(word), recall.trigrams(q)) for q in sought)
        if score >= recall.SUGGEST_MIN_SIMILARITY:
            scored.append((-score, word))
    return [w for _, w in sorted(scored)][:limit]


def test_it_suggests_the_conversations_own_spelling_where_the_query_finds_nothing(conversation):
    fact = say(conversation, "The Deployment to Portugal runs on PostgreSQL 15 with pg_wal on its own disk.")
    say(conversation, "Noted.", role="assistant")
    compact(conversation)
    assert recall.search(conversation_id=conversation.id, query="postgres", compacted_only=True) == []
    assert suggest(conversation, "postgres") == ["PostgreSQL"]
    assert suggest(conversation, "deploy") == ["Deployment"]  # as written, not the stem
    assert suggest(conversation, "Porto") == ["Portugal"]
    found = recall.search(conversation_id=conversation.id, query="PostgreSQL", compacted_only=True)
    assert [h.id for h in found] == [fact.id]


def test_the_words_of_another_conversation_or_another_user_are_never_suggested(conversation, alice, bob):
    mine = say(conversation, "the deployment checklist")
    for owner, words in ((alice, "the deployer and the deployers"), (bob, "redeploy deployed deploying")):
        other = Conversation.objects.create(owner=owner)
        session_start(conversation=other)
        say(other, words)
        compact(other)
    compact(conversation)
    assert suggest(conversation, "deploy") == ["deployment"]
    Message.objects.filter(id=mine.id).delete()
    assert suggest(conversation, "deploy") == []


def test_nothing_compacted_gives_nothing_though_the_whole_conversation_holds_the_word(conversation):
    say(conversation, "the deployment checklist")
    assert suggest(conversation, "deploy") == []
    assert recall.recall_for(conversation_id=conversation.id,
                             session_id=session_active(conversation).id).suggest("deploy") == []
    assert suggest(conversation, "deploy", compacted_only=False) == ["deployment"]


def test_an_ended_session_counts_as_compacted(conversation):
    say(conversation, "the deployment checklist")
    session = session_active(conversation)
    session.ended_at = session.started_at
    session.save(update_fields=["ended_at"])
    assert suggest(conversation, "deploy") == ["deployment"]


def test_stopwords_and_the_querys_own_words_are_left_out(conversation):
    say(conversation, "There were thermals there; deploy the Deployer, then deploy again.")
    compact(conversation)
    # "there" is as close to "thermal" as "thermals" is, "deploy" is the query's own word.
    assert recall.trigram_similarity(recall.trigrams("there"), recall.trigrams("thermal")) >= 0.3
    assert suggest(conversation, "Thermal DEPLOY there") == ["thermals", "Deployer"]


def test_the_limit_is_respected_and_the_closest_come_first(conversation):
    say(conversation, "deployment deployments deployer deployers deploying deployed redeploy redeployed "
                      "undeployed deploys predeploy")
    compact(conversation)
    every = suggest(conversation, "deploy", limit=20)
    assert len(every) == 9  # "redeployed" and "undeployed" share too few trigrams
    assert every == reference(conversation, "deploy", limit=20)
    scores = [recall.trigram_similarity(recall.trigrams(w), recall.trigrams("deploy")) for w in every]
    assert scores == sorted(scores, reverse=True)
    assert suggest(conversation, "deploy", limit=3) == every[:3]
    assert suggest(conversation, "deploy", limit=0) == []
    engine_side = recall.recall_for(conversation_id=conversation.id, session_id=session_active(conversation).id)
    assert engine_side.suggest("deploy") == every[:8]


def test_the_suggestions_are_every_close_word_the_history_holds_and_only_those(conversation):
    say(conversation, "The staging gateway listens on 8443; the gateways share one certificate.")
    say(conversation, [{"type": "text", "text": "Latency of the gatekeeper was 120 ms at the gate."}])
    call = {"id": "c1", "type": "function", "function": {"name": "status", "arguments": '{"service": "gateway"}'}}
    say(conversation, "", role="assistant", tool_calls=[call])
    say(conversation, "gatewayd: listening, stage=prod", role="tool", tool_call_id="c1", name="status")
    compact(conversation)
    say(conversation, "the gatehouse is not compacted yet")
    query = "gateway staging latencies"
    got = suggest(conversation, query)
    assert got == ["gatewayd", "gateways", "Latency", "gate", "stage"]  # "gatekeeper" is too far
    assert [w.lower() for w in got] == reference(conversation, query)


@pytest.mark.parametrize("query", ["", "   ", "?!... --- ***", "'\"`()[]{}<>,;", "%%", "a b"])
def test_a_query_without_words_gives_nothing_without_error(conversation, query):
    say(conversation, "the deployment checklist")
    compact(conversation)
    assert suggest(conversation, query) == []


@pytest.mark.parametrize("query", ['deploy"; DROP TABLE agent_sessions_message; --', "deploy' OR '1'='1",
                                   '"deploy" AND (NEAR', "deploy* OR -", "conv : c deploy", "%deploy%", "deploy\\",
                                   "{body}: ^deploy", "deploy %s %(x)s ?"])
def test_quotes_and_query_syntax_in_the_query_are_only_words(conversation, query):
    say(conversation, "the deployment checklist")
    compact(conversation)
    assert suggest(conversation, query) == ["deployment"]
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_a_word_edited_out_of_its_message_is_no_longer_suggested(conversation):
    row = say(conversation, "the deployment checklist")
    compact(conversation)
    Message.objects.filter(id=row.id).update(content="the rollout checklist")
    assert suggest(conversation, "deploy") == []
    assert suggest(conversation, "rollouts") == ["rollout"]


def test_a_word_is_found_in_the_compacted_history_wherever_it_was_first_written(conversation):
    older = say(conversation, "the checklist")
    say(conversation, "the Deployment is live")  # first written in the live context
    summary = say(conversation, "summary: the rollback went well", is_summary=True)
    replaced = say(conversation, "the deployment and the rollouts", role="assistant")
    Message.objects.filter(id__in=[older.id, summary.id, replaced.id]).update(archived=True)  # replaced: a regenerate
    assert suggest(conversation, "deploy rollout") == ["rollouts", "deployment"]
    assert suggest(conversation, "rollbacks") == []  # a summary is not searchable
    Message.objects.filter(id=replaced.id).delete()
    assert suggest(conversation, "deploy") == []
    Message.objects.filter(id=older.id).update(content="the DEPLOYMENT checklist")  # older than the live one
    assert suggest(conversation, "deploy") == ["DEPLOYMENT"]


def stored_rows(conversation_key, trigram_key) -> int:
    """Rows of a conversation in the word list (and, on SQLite, in its trigram table)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {WORDS_TABLE} WHERE conversation_id = %s", [conversation_key])
        rows = cursor.fetchone()[0]
        if connection.vendor == "sqlite":
            cursor.execute("SELECT count(*) FROM agent_sessions_conversation_trigram WHERE conversation_key = %s",
                           [trigram_key])
            rows += cursor.fetchone()[0]
    return rows


def test_deleting_the_conversation_forgets_its_words(conversation):
    say(conversation, "the deployment checklist")
    key = recall_index._db_conversation_id(conversation.id)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT word FROM {WORDS_TABLE} WHERE conversation_id = %s ORDER BY word", [key])
        assert [row[0] for row in cursor.fetchall()] == ["checklist", "deployment", "the"]
        trigram_key = None
        if connection.vendor == "sqlite":
            cursor.execute("SELECT key FROM agent_sessions_conversation_word_key WHERE conversation_id = %s", [key])
            trigram_key = cursor.fetchone()[0]
    assert stored_rows(key, trigram_key) >= 3
    conversation.delete()
    assert stored_rows(key, trigram_key) == 0


def drop_word_triggers():
    """What a later migration that rebuilds the message and conversation tables does on SQLite."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for suffix in ("ai", "au", "cd"):
                cursor.execute(f"DROP TRIGGER {WORDS_TABLE}_{suffix}")
        else:
            cursor.execute(f"DROP TRIGGER {WORDS_TABLE}_ai ON agent_sessions_message")
            cursor.execute(f"DROP TRIGGER {WORDS_TABLE}_cd ON agent_sessions_conversation")
    recall_index._words_ensured.clear()


def test_the_first_suggestion_rebuilds_dropped_triggers_and_misses_nothing_stored_meanwhile(conversation):
    say(conversation, "the deployment checklist")
    drop_word_triggers()
    assert not recall_index.words_present()
    say(conversation, "the rollout plan")
    compact(conversation)
    assert suggest(conversation, "rollouts deploy") == ["rollout", "deployment"]
    assert recall_index.words_present()
    say(conversation, "the canary stage")  # the triggers are back
    compact(conversation)
    assert suggest(conversation, "canaries") == ["canary"]


def test_the_post_migrate_receiver_restores_the_word_triggers(conversation):
    drop_word_triggers()
    recall.index_ensure_after_migrate(sender=None, using="default")
    assert recall_index.words_present()
    say(conversation, "the deployment checklist")
    compact(conversation)
    assert suggest(conversation, "deploy") == ["deployment"]


@pytest.fixture
def trgm_state():
    yield
    recall_index._trgm.pop("default", None)
    recall_index._words_ensured.discard("default")


def test_without_pg_trgm_the_suggestions_are_the_same_and_its_absence_is_logged_once(conversation, caplog,
                                                                                       trgm_state):
    say(conversation, "The staging gateway listens on 8443; the gateways and the gatekeeper share a gate.")
    compact(conversation)
    query = "gateway staging"
    before = suggest(conversation, query)
    assert before and [w.lower() for w in before] == reference(conversation, query)
    if connection.vendor == "postgresql":  # rolled back with the test's transaction
        with connection.cursor() as cursor:
            cursor.execute("DROP EXTENSION pg_trgm CASCADE")
    recall_index._trgm.pop("default", None)
    recall_index._words_ensured.discard("default")
    with caplog.at_level(logging.WARNING, logger="sessions.services.recall"):
        assert suggest(conversation, query) == before
        recall_index.words_ensure(force=True)
        assert suggest(conversation, query) == before
    warned = [r for r in caplog.records if "pg_trgm" in r.getMessage()]
    assert len(warned) == (1 if connection.vendor == "postgresql" else 0)


@pytest.mark.django_db(transaction=True)
def test_the_migration_reads_the_words_of_messages_stored_before_it_and_reverses_cleanly(alice):
    executor = MigrationExecutor(connection)
    before = [("agent_sessions", "0010_attachments")]
    executor.migrate(before)
    try:
        with connection.cursor() as cursor:
            assert WORDS_TABLE not in connection.introspection.table_names(cursor)
        old = executor.loader.project_state(before).apps
        c = old.get_model("agent_sessions", "Conversation").objects.create(owner_id=alice.id)
        s = old.get_model("agent_sessions", "Session").objects.create(conversation=c)
        old.get_model("agent_sessions", "Message").objects.create(
            conversation=c, session=s, seq=0, role="user", content="the ibex deployment", archived=True)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        recall_index._words_ensured.clear()
        assert recall_index.words_present()
        assert recall.suggest_terms(conversation_id=c.id, query="deploy ibexes") == ["deployment", "ibex"]
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        recall.index_ensure_after_migrate(sender=None, using="default")
