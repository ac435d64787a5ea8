"""Recall through the agent loop: with the lcm engine, a fact compacted away early is found again.
The real loop runs against the simulator over HTTP (in-process), Celery eager, on the tier's
database; the simulator calls context_search when asked to "search the history for …"."""
from __future__ import annotations

import json

import pytest

from compression import settings_store
from compression.core.anchors import parse_index
from compression.core.lcm import RECALL_NOTE
from compression.core.markers import SUMMARY_PREFIX, summary_body_of
from compression.core.tokens import count_tokens
from sessions.models import CompressionEvent, Conversation, Message
from sessions.services.context import context_messages, message_append, session_active, session_start
from sessions.services.turns import turn_submit
from simulator.policy import PROJECT_TOOLS, respond

from .test_recall_index import index_after_migrate  # noqa: F401  (module fixture: the index objects exist)

FACT = "The Lisbon offsite budget is 42,500 EUR, approved by finance."


@pytest.fixture(autouse=True)
def _wiring(eager_simulator):
    """Every test here talks to the shared simulator (tests/web/conftest.py)."""


def tools(*names):
    return [{"name": n, "input_schema": {"type": "object"}} for n in names]


def test_the_simulator_searches_the_history_only_when_the_tool_is_offered():
    asked = [{"role": "user", "content": "What was the budget? Search the history for the Lisbon budget."}]
    call = respond({"messages": asked, "tools": tools(*PROJECT_TOOLS, "context_search"), "max_tokens": 500},
                   count_tokens=count_tokens)
    assert call.kind == "tool_use"
    assert call.blocks[1]["name"] == "context_search"
    assert call.blocks[1]["input"] == {"query": "the Lisbon budget", "limit": 5}
    # Without context_search the words are read as they always were: a workspace search.
    old = respond({"messages": asked, "tools": tools(*PROJECT_TOOLS), "max_tokens": 500}, count_tokens=count_tokens)
    assert [b["name"] for b in old.blocks if b["type"] == "tool_use"] == ["search_files"]


def test_the_simulators_report_quotes_the_best_snippet():
    result = json.dumps({"query": "budget", "results": [{"ref": "m12", "role": "user", "snippet": FACT}]})
    messages = [
        {"role": "user", "content": "search the history for budget"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "context_search",
                                           "input": {"query": "budget", "limit": 5}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result}]},
    ]
    text = respond({"messages": messages, "max_tokens": 500}, count_tokens=count_tokens).blocks[0]["text"]
    assert f'best (m12): "{FACT}"' in text


@pytest.mark.django_db
def test_a_question_about_an_early_fact_is_answered_from_the_history_after_compaction(
        alice, django_capture_on_commit_callbacks):
    settings_store.save_group("context", {"engine": "lcm"})
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session = session_start(conversation=conversation)
    for i in range(3):  # the head a first compaction keeps
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=f"Hello {i}.")
    fact = message_append(session=session, role="user", content=FACT)
    message_append(session=session, role="assistant", content="Noted.")
    for i in range(40):  # enough to pass the 64k model's threshold
        message_append(session=session, role="user", content=f"Question {i}: " + "detail " * 700)
        message_append(session=session, role="assistant", content=f"Answer {i}: " + "explained " * 700)

    with django_capture_on_commit_callbacks(execute=True):
        turn, _ = turn_submit(user=alice, conversation_id=conversation.id,
                              text="What was the offsite budget? Search the history for the Lisbon offsite budget.")
    turn.refresh_from_db()
    assert turn.status == "done", turn.error

    assert CompressionEvent.objects.filter(conversation=conversation, status="compressed").count() == 1
    live = context_messages(session_active(conversation))
    [summary] = [m for m in live if m.get("_compressed_summary")]
    assert summary["content"].startswith(f"{SUMMARY_PREFIX} {RECALL_NOTE}")
    assert ("number", "42,500 EUR", f"m{fact.id}") in {(a.kind, a.value, a.ref) for a in
                                                       parse_index(summary_body_of(summary))}
    assert not any(m.get("content") == FACT for m in live)  # the original is out of the context

    tool = Message.objects.get(conversation=conversation, role="tool", name="context_search")
    found = json.loads(tool.content)
    assert found["results"][0]["ref"] == f"m{fact.id}" and "42,500 EUR" in found["results"][0]["snippet"]
    answer = Message.objects.filter(conversation=conversation, role="assistant").order_by("-id").first()
    assert f"best (m{fact.id})" in answer.content and "42,500 EUR" in answer.content
