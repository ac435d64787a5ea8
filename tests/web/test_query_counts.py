"""How many queries the live panels and the home page cost, pinned: a page with many panels, or a
user with many conversations, must not multiply them."""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from compression.models import MCPServer
from sessions import live, presenters
from sessions.models import ApiCall, Conversation, Session
from sessions.services.context import message_append, session_active, session_start

pytestmark = pytest.mark.django_db


def busy_conversation(owner, title="busy") -> Conversation:
    """A conversation with messages, calls in two sessions, a compaction divider and a turn."""
    c = Conversation.objects.create(owner=owner, title=title, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=c)
    for i in range(6):
        message_append(session=session, role="user", content=f"question {i}")
        message_append(session=session, role="assistant", content=f"answer {i}")
    child = Session.objects.create(conversation=c, parent=session)
    session.ended_at = child.started_at
    session.save()
    summary = message_append(session=child, role="user", content="[summary]", is_summary=True)
    c.compression_events.create(session=session, new_session=child, summary_message=summary, trigger="manual",
                                status="compressed")
    for s in (session, child):
        for _ in range(3):
            ApiCall.objects.create(conversation=c, session=s, provider="simulator", model=c.model,
                                   prompt_tokens=1000, cache_read_tokens=800)
    ApiCall.objects.create(conversation=c, session=child, purpose="compression", provider="simulator",
                           model=c.model, cost=1)
    c.turns.create(status="done")
    child.last_prompt_tokens = 1200
    child.save()
    return c


def test_the_gauge_takes_at_most_four_queries(alice, django_assert_max_num_queries):
    """The session, its context, the model's ratio and the MCP servers (one query however many)."""
    c = busy_conversation(alice)
    session = session_active(c)
    session.last_prompt_tokens = 0  # the estimate path reads the context too
    session.save()
    MCPServer.objects.create(name="time", command="mcp-server-time", state="connected",
                             tools=[{"name": "now", "description": "the time", "input_schema": {"type": "object"}}])
    MCPServer.objects.create(name="git", command="mcp-server-git", state="connected",
                             tools=[{"name": "status", "description": "git status", "input_schema": {"type": "object"}}])
    with django_assert_max_num_queries(4):
        g = presenters.gauge(c)
    assert g["basis"] == "counted" and g["tokens"] > 0
    assert {"tools:mcp:time", "tools:mcp:git"} <= {p["kind"] for p in g["breakdown"]["parts"]}


def test_the_cache_panel_takes_at_most_three_queries(alice, django_assert_max_num_queries):
    c = busy_conversation(alice)
    with django_assert_max_num_queries(3):
        panel = presenters.cache_panel(c)
    assert panel["calls"] == 6 and panel["hit_rate"] == 80.0 and panel["summariser_cost"] == 1
    assert [b["compressed"] for b in panel["bars"]] == [False, False, False, True, False, False]


def test_the_live_state_on_a_socket_connect_takes_at_most_eight_queries(alice, django_assert_max_num_queries):
    c = busy_conversation(alice)
    child = session_active(c)
    for _ in range(3):  # more dividers must not mean more queries
        summary = message_append(session=child, role="user", content="[another summary]", is_summary=True)
        c.compression_events.create(session=child, summary_message=summary, trigger="manual", status="compressed")
    with django_assert_max_num_queries(8):  # the MCP servers' one included
        html = live.live_state(c)
    assert 'id="gauge"' in html and 'id="cache-panel"' in html and 'data-role="summary"' in html


def test_the_home_page_costs_the_same_for_one_conversation_and_for_ten(client, alice):
    client.force_login(alice)
    busy_conversation(alice, "first")
    with CaptureQueriesContext(connection) as one:
        assert client.get(reverse("home")).status_code == 200
    for i in range(9):
        busy_conversation(alice, f"more {i}")
    with CaptureQueriesContext(connection) as ten:
        body = client.get(reverse("home")).content.decode()
    assert body.count("/conversations/") >= 10
    assert len(ten.captured_queries) == len(one.captured_queries)


def test_the_cache_panel_names_the_strategy_and_both_ttls_it_writes(alice):
    """rolling_1h writes 1h and the configured TTL: the panel says so, not "5m TTL" alone, and a
    saved change shows on the next render."""
    from compression import settings_store

    c = busy_conversation(alice)
    settings_store.save_group("caching", {"strategy": "rolling_1h", "cache_ttl": "5m"})
    label = presenters.cache_panel(c)["status_label"]
    assert "strategy rolling_1h" in label and "1h on the system prompt" in label and "5m on the messages" in label
    settings_store.save_group("caching", {"strategy": "system_and_3", "cache_ttl": "1h"})
    label = presenters.cache_panel(c)["status_label"]
    assert "strategy system_and_3: 1h on the system prompt and the last 3 messages" in label


def test_the_compaction_divider_and_the_event_feed_print_counts_with_thousands_separators(alice):
    from sessions import fragments

    c = busy_conversation(alice)
    event = c.compression_events.get()
    event.tokens_before, event.tokens_after, event.messages_before, event.messages_after = 97_952, 12_480, 1_204, 31
    event.tokens_read, event.messages_read, event.summariser_calls = 85_470, 1_173, 2
    event.save()
    feed = fragments.render_event_feed(c)
    assert "1,204 → 31 messages · 97,952 → 12,480 tokens" in feed
    assert "read 1,173 messages (85,470 tokens) in 2 calls" in feed
    assert "1,204 → 31 messages · 97,952 → 12,480 tokens" in fragments.render_compaction_divider(event)
