"""The message search index (migration 0005) and the recall service, on the tier's database (SQLite
FTS5 by default, the PostgreSQL tsvector when DATABASE_URL points at PostgreSQL): every stored
message is found by its words without any Python write path knowing about the index."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from sessions.models import Conversation, Message
from sessions.services import recall, recall_index
from sessions.services.context import message_append, session_active, session_start

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module", autouse=True)
def index_after_migrate(django_db_setup, django_db_blocker):
    """What the post_migrate receiver does after the test database is migrated (a migration after
    0005 rebuilds the message table on SQLite, dropping its triggers)."""
    with django_db_blocker.unblock():
        recall.index_ensure_after_migrate(sender=None, using="default")


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice)
    session_start(conversation=c)
    return c


def say(conversation, role, content, **kw):
    return message_append(session=session_active(conversation), role=role, content=content, **kw)


def found(conversation, query, **kw):
    return [h.id for h in recall.search(conversation_id=conversation.id, query=query, **kw)]


def test_a_stored_message_is_found_by_a_question_with_a_snippet_holding_the_fact(conversation):
    say(conversation, "user", "Let us plan the offsite.")
    fact = say(conversation, "user", "The Lisbon offsite budget is 42,500 EUR, approved by finance on Monday.")
    say(conversation, "assistant", "Noted, I will keep track of the venue options.")
    hits = recall.search(conversation_id=conversation.id, query="What was the budget for the Lisbon offsite?")
    assert hits[0].id == fact.id and hits[0].ref == f"m{fact.id}"
    assert "42,500 EUR" in hits[0].snippet
    assert "<mark>" in hits[0].snippet_html and recall.MARK_START not in hits[0].snippet


def test_tool_results_tool_call_arguments_and_nested_blocks_are_indexed_but_image_data_is_not(conversation):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "src/auth/session.py"}'}}
    asked = say(conversation, "assistant", "", tool_calls=[call])
    result = say(conversation, "tool", "Traceback: KeyError: 'tenant_slug' in resolve_tenant", tool_call_id="call_1",
                 name="read_file")
    blocks = say(conversation, "user", [
        {"type": "text", "text": "see the screenshot"},
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "quokka migration"}]},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJDREVGR0hJSktMTU5PUA"}},
    ])
    assert found(conversation, "src/auth/session.py") == [asked.id]
    assert found(conversation, "tenant_slug") == [result.id]
    assert found(conversation, "quokka") == [blocks.id]
    assert found(conversation, "QUJDREVGR0hJSktMTU5PUA") == []


def test_a_search_reads_one_conversation_only(conversation, alice):
    other = Conversation.objects.create(owner=alice)
    session_start(conversation=other)
    say(other, "user", "The staging port is 8443.")
    mine = say(conversation, "user", "The production port is 443.")
    assert found(conversation, "port") == [mine.id]


def test_the_index_follows_updates_and_deletes_made_outside_message_append(conversation):
    row = say(conversation, "user", "the wombat protocol")
    Message.objects.filter(id=row.id).update(content="the platypus protocol")
    assert found(conversation, "wombat") == []
    assert found(conversation, "platypus") == [row.id]
    Message.objects.filter(id=row.id).update(archived=True)  # archiving keeps the entry
    assert found(conversation, "platypus") == [row.id]
    Message.objects.filter(id=row.id).delete()
    assert found(conversation, "platypus") == []


def test_copies_and_summaries_are_not_results_and_the_agent_sees_only_what_was_compacted(conversation):
    original = say(conversation, "user", "the heron checkpoint is at 7 km")
    session = session_active(conversation)
    Message.objects.filter(id=original.id).update(archived=True)
    say(conversation, "user", "the heron checkpoint is at 7 km", visible=False)  # a carried copy
    say(conversation, "user", "summary: heron checkpoint", is_summary=True)
    live = say(conversation, "user", "is the heron checkpoint still open?")
    assert sorted(found(conversation, "heron checkpoint")) == sorted([original.id, live.id])
    assert found(conversation, "heron checkpoint", compacted_only=True) == [original.id]
    # An ended session is compacted too (rotation).
    session.ended_at = session.started_at
    session.save(update_fields=["ended_at"])
    assert sorted(found(conversation, "heron", compacted_only=True)) == sorted([original.id, live.id])


@pytest.mark.parametrize("query", ['"budget" AND (NEAR', "budget* OR -", "conv : c", "{body}: ^x", "'", "***", ""])
def test_query_syntax_in_the_users_words_is_never_an_error(conversation, query):
    say(conversation, "user", "the budget is fixed")
    hits = recall.search(conversation_id=conversation.id, query=query)
    assert all(h.role == "user" for h in hits)


def test_better_matches_rank_first(conversation):
    weak = say(conversation, "user", "the port question can wait")
    strong = say(conversation, "user", "the staging port for the gateway is 8443")
    say(conversation, "user", "unrelated words entirely")
    assert found(conversation, "which staging port does the gateway use")[:2] == [strong.id, weak.id]


def test_expand_returns_the_verbatim_originals_around_a_reference_in_order(conversation):
    rows = [say(conversation, "user" if i % 2 == 0 else "assistant", f"line {i}") for i in range(9)]
    out = recall.expand(conversation_id=conversation.id, ref=f"m{rows[4].id}", before=2, after=1)
    assert [m["text"] for m in out["messages"]] == ["line 2", "line 3", "line 4", "line 5"]
    assert out["messages"][2]["ref"] == f"m{rows[4].id}"


def test_expand_is_bounded_and_says_what_it_left_out(conversation):
    big = say(conversation, "tool", "x" * 50_000, tool_call_id="c1", name="read_file")
    for _ in range(10):
        say(conversation, "user", "y" * 5_000)
    out = recall.expand(conversation_id=conversation.id, ref=big.id, before=0, after=50)
    assert sum(len(m["text"]) for m in out["messages"]) <= recall.EXPAND_TOTAL_MAX_CHARS
    assert out["messages"][0]["omitted_chars"] == 50_000 - recall.EXPAND_MESSAGE_MAX_CHARS
    assert len(out["messages"]) <= 1 + recall.EXPAND_MAX_NEIGHBOURS


def test_expand_refuses_a_reference_of_another_conversation_or_a_malformed_one(conversation, alice):
    other = Conversation.objects.create(owner=alice)
    session_start(conversation=other)
    theirs = say(other, "user", "secret")
    with pytest.raises(recall.BadReference, match="no message"):
        recall.expand(conversation_id=conversation.id, ref=f"m{theirs.id}")
    with pytest.raises(recall.BadReference, match="m123"):
        recall.expand(conversation_id=conversation.id, ref="the budget")


def test_context_refs_point_copies_at_their_originals(conversation):
    session = session_active(conversation)
    u = say(conversation, "user", "first question")
    call = {"id": "call_9", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    a = say(conversation, "assistant", "", tool_calls=[call])
    t = say(conversation, "tool", "a.txt\nb.txt", tool_call_id="call_9", name="list_files")
    Message.objects.filter(session=session).update(archived=True)
    say(conversation, "user", "summary", is_summary=True)
    say(conversation, "user", "first question", visible=False)
    say(conversation, "assistant", "", tool_calls=[call], visible=False)
    say(conversation, "tool", "[Old tool output cleared]", tool_call_id="call_9", name="list_files", visible=False)
    new = say(conversation, "user", "next")
    assert recall.context_refs(session) == [("user", None), ("user", f"m{u.id}"), ("assistant", f"m{a.id}"),
                                            ("tool", f"m{t.id}"), ("user", f"m{new.id}")]


def drop_index_objects():
    """What a later migration that rebuilds the message table does on SQLite (Django's remake
    drops the table's triggers); on PostgreSQL, the column gone."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for suffix in ("ai", "au", "ad"):
                cursor.execute(f"DROP TRIGGER {recall.FTS_TABLE}_{suffix}")
        else:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # ALTER TABLE waits for no pending check
            cursor.execute("ALTER TABLE agent_sessions_message DROP COLUMN search_vector")
    recall_index._ensured.clear()


def test_a_search_rebuilds_index_objects_a_migration_dropped_and_misses_nothing_stored_meanwhile(conversation):
    kept = say(conversation, "user", "the okapi enclosure")
    changed = say(conversation, "user", "the tapir enclosure")
    drop_index_objects()
    assert not recall.index_present()
    added = say(conversation, "user", "the gharial enclosure")
    Message.objects.filter(id=changed.id).update(content="the margay enclosure")
    assert sorted(found(conversation, "enclosure")) == sorted([kept.id, changed.id, added.id])
    assert found(conversation, "tapir") == [] and found(conversation, "margay") == [changed.id]
    assert recall.index_present()
    later = say(conversation, "user", "the quoll enclosure")  # the triggers are back
    assert found(conversation, "quoll") == [later.id]


def test_the_post_migrate_receiver_restores_the_index_objects(conversation):
    row = say(conversation, "user", "the saola survey")
    drop_index_objects()
    recall.index_ensure_after_migrate(sender=None, using="default")
    assert recall.index_present()
    assert found(conversation, "saola") == [row.id]


@pytest.mark.django_db(transaction=True)
def test_the_migration_indexes_existing_messages_and_reverses_cleanly(alice):
    executor = MigrationExecutor(connection)
    before, after = [("agent_sessions", "0004_compression_event_reading")], [("agent_sessions", "0005_message_search")]
    executor.migrate(before)
    try:
        assert not recall.index_present()
        old = executor.loader.project_state(before).apps  # the tables as they were at 0004
        c = old.get_model("agent_sessions", "Conversation").objects.create(owner_id=alice.id)
        s = old.get_model("agent_sessions", "Session").objects.create(conversation=c)
        row = old.get_model("agent_sessions", "Message").objects.create(
            conversation=c, session=s, seq=0, role="user", content="the ibex report")
        executor.loader.build_graph()
        executor.migrate(after)
        assert recall.index_present()
        assert found(c, "ibex") == [row.id]
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        recall.index_ensure_after_migrate(sender=None, using="default")
