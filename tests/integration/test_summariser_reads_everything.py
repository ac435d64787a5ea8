"""On real workers, a default 200K conversation compressed at its threshold: the summariser read
every message it summarised (the old serialiser silently dropped the middle of a long middle), and
the event says how many calls that took."""
from __future__ import annotations

import pytest

from sessions.models import ApiCall, CompressionEvent, Conversation
from sessions.presenters import gauge
from sessions.services.compaction import compression_request
from sessions.services.context import message_append, session_start
from tests.integration.helpers import wait_compressions_settled

pytestmark = pytest.mark.integration


def test_a_200k_conversation_at_its_threshold_is_read_whole(live, alice):
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=conversation)
    i = 0
    while gauge(conversation)["tokens"] < gauge(conversation)["threshold"]:
        for _ in range(20):
            message_append(session=session, role="user", content=f"Step {i}: marker-{i} " + "requirement " * 350)
            message_append(session=session, role="assistant", content=f"Done {i}: " + "decision " * 350)
            i += 1
    event = compression_request(conversation_id=conversation.id, trigger="admin").event
    wait_compressions_settled(conversation, timeout=120)
    event.refresh_from_db()
    assert event.status == "compressed", event.reason
    assert event.summarized_count > 100
    assert event.messages_read == event.summarized_count  # every summarised message was read
    calls = ApiCall.objects.filter(conversation=conversation, purpose="compression", error="")
    assert event.summariser_calls == calls.count() >= 1
    assert sum(c.prompt_tokens for c in calls) >= event.tokens_read > 0
    assert CompressionEvent.objects.filter(conversation=conversation, status="compressed").count() == 1
