"""Recall on the default engine, through the real stack: with the built-in compressor (no setting
changed), a fact compacted away early is found again when the user asks to search the history.
The turn runs in the real Celery worker: its preflight compacts the conversation (the simulator
writes the summary), the agent calls context_search (the simulator's model asks for it when the
tool is offered), the worker answers it from the database, and the reply quotes the fact."""
from __future__ import annotations

import json

import pytest

from compression import settings_store
from compression.core.markers import RECALL_TOOLS_NOTE, SUMMARY_PREFIX
from sessions.models import CompressionEvent, Message
from sessions.services.context import context_messages, message_append, session_active
from sessions.services.turns import turn_submit
from tests.integration.helpers import make_conversation, sim_control, wait_turn

pytestmark = pytest.mark.integration

FACT = "The Lisbon offsite budget is 42,500 EUR, approved by finance."


def test_the_compressor_finds_a_compacted_fact_when_asked_to_search_the_history(live, alice):
    sim_control(live, "/_sim/faults", {"clear": True})
    cfg = settings_store.current()
    assert (cfg.context.engine, cfg.context.recall_tools) == ("compressor", True)  # the defaults
    conversation = make_conversation(alice, model="sim-claude-64k")
    session = session_active(conversation)
    for i in range(3):  # the head a first compaction keeps
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"Hello {i}.")
    fact = message_append(session=session, role="user", content=FACT)
    message_append(session=session, role="assistant", content="Noted.")
    for i in range(40):  # past the 64k model's threshold: the turn's preflight compacts
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 700)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 700)

    turn, _ = turn_submit(user=alice, conversation_id=conversation.id,
                          text="What was the offsite budget? Search the history for the Lisbon offsite budget.")
    assert wait_turn(turn, 120).status == "done", turn.error

    assert CompressionEvent.objects.filter(conversation=conversation, status="compressed").count() == 1
    live_context = context_messages(session_active(conversation))
    [summary] = [m for m in live_context if m.get("_compressed_summary")]
    assert summary["content"].startswith(f"{SUMMARY_PREFIX} {RECALL_TOOLS_NOTE}")
    assert not any(m.get("content") == FACT for m in live_context)  # the original left the context

    tool = Message.objects.get(conversation=conversation, role="tool", name="context_search")
    found = json.loads(tool.content)
    assert found["results"][0]["ref"] == f"m{fact.id}" and "42,500 EUR" in found["results"][0]["snippet"]
    reply = Message.objects.filter(conversation=conversation, role="assistant").order_by("-id").first()
    assert f"best (m{fact.id})" in reply.content and "42,500 EUR" in reply.content
