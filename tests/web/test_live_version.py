"""The live state's version (`sessions.live.state_version`): the fingerprint a conversation page is
served with and a socket's connect compares with the database's. Equal for an unchanged
conversation; different after any change a live panel shows, whichever kind; none ("") when the
gauge's figures depend on the time. And the connect it makes cheap: two queries and no template
when the page is current, the whole state (pinned as before) when it is not."""
from __future__ import annotations

import dataclasses
import time

import pytest
from django.test.signals import template_rendered
from django.utils import timezone

from compression import settings_store
from compression.core.base import chunk_phase
from compression.models import MCPServer
from sessions import fragments, live, selectors
from sessions.models import ApiCall, Attachment, CompressionEvent, Conversation, Message, Session, Turn
from sessions.services.context import message_append, session_active, session_start
from sessions.services.pressure import ratio_record
from sessions.services.runtime import current_config

pytestmark = pytest.mark.django_db


def conversation_with_history(owner) -> Conversation:
    c = Conversation.objects.create(owner=owner, title="history", provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=c)
    for i in range(3):
        message_append(session=session, role="user", content=f"question {i}")
        message_append(session=session, role="assistant", content=f"answer {i}")
    c.turns.create(status="done", user_message=Message.objects.filter(conversation=c, role="user").last())
    ApiCall.objects.create(conversation=c, session=session, provider="simulator", model=c.model, prompt_tokens=900)
    return c


def version(c: Conversation) -> str:
    """As the page view takes it: the conversation as read, the settings, then the marks."""
    return live.state_version(Conversation.objects.get(pk=c.pk), current_config())


def _message(c):
    message_append(session=session_active(c), role="user", content="one more")


def _turn_queued(c):
    c.turns.create(status="queued", text="waiting")


def _turn_started(c):
    Turn.objects.filter(conversation=c).update(status="running", partial_text="")


def _streamed_more(c):
    _turn_started(c)
    before = version(c)
    Turn.objects.filter(conversation=c).update(partial_text="The reply so")
    assert version(c) != before


def _stop_requested(c):
    Turn.objects.filter(conversation=c).update(stop_requested=True)


def _turn_failed(c):
    Turn.objects.filter(conversation=c).update(status="failed", error="the model refused")


def _replaced(c):
    Message.objects.filter(id=Message.objects.filter(conversation=c).latest("id").id).update(archived=True, replaced=True)


def _stopped(c):
    Message.objects.filter(id=Message.objects.filter(conversation=c).latest("id").id).update(stopped=True)


def _compression_queued(c):
    CompressionEvent.objects.create(conversation=c, session=session_active(c), trigger="manual", status="queued")


def _compression_progress(c):
    event = CompressionEvent.objects.create(conversation=c, session=session_active(c), trigger="manual",
                                            status="running", phase=chunk_phase(1, 3))
    before = version(c)
    CompressionEvent.objects.filter(id=event.id).update(phase=chunk_phase(2, 3))
    assert version(c) != before
    CompressionEvent.objects.filter(id=event.id).update(status="compressed", phase="done")


def _api_call(c):
    ApiCall.objects.create(conversation=c, session=session_active(c), provider="simulator", model=c.model,
                           prompt_tokens=1200, cache_read_tokens=900)


def _real_count(c):
    Session.objects.filter(id=session_active(c).id).update(last_prompt_tokens=4321, counted_prompt_tokens=4000,
                                                          last_call_at=timezone.now())


def _rotation(c):
    old = session_active(c)
    Session.objects.filter(id=old.id).update(ended_at=timezone.now())
    Session.objects.create(conversation=c, parent=old)


def _ratio(c):
    ratio_record(model=c.model, real=1100, counted=1000)


def _setting(c):
    settings_store.save_group("compression", {"threshold": 0.6})


def _title(c):
    Conversation.objects.filter(pk=c.pk).update(title="A new title")


def _model_switch(c):
    Conversation.objects.filter(pk=c.pk).update(model="sim-claude-64k")


def _mcp_switched_off(c):
    MCPServer.objects.create(name="time", command="mcp-server-time", state="connected",
                             tools=[{"name": "now", "description": "the time", "input_schema": {"type": "object"}}])
    before = version(c)
    Conversation.objects.filter(pk=c.pk).update(mcp_off=["time"])
    assert version(c) != before


def _mcp_state(c):
    server = MCPServer.objects.create(name="time", command="mcp-server-time", state="connected")
    before = version(c)
    MCPServer.objects.filter(id=server.id).update(state="failing", failures=1, checked_at=timezone.now())
    assert version(c) != before
    before = version(c)
    MCPServer.objects.filter(id=server.id).update(enabled=False)
    assert version(c) != before
    MCPServer.objects.filter(id=server.id).update(enabled=True, state="down", failures=3)


def _attachment(c):
    message = Message.objects.filter(conversation=c, role="user").latest("id")
    Attachment.objects.create(owner=c.owner, conversation=c, message=message, kind="text", name="notes.txt", size=5,
                              media_type="text/plain", sha256="0" * 64, storage="x/notes.txt")


CHANGES = [_message, _turn_queued, _turn_started, _streamed_more, _stop_requested, _turn_failed, _replaced, _stopped,
           _compression_queued, _compression_progress, _api_call, _real_count, _rotation, _ratio, _setting, _title,
           _model_switch, _mcp_switched_off, _mcp_state, _attachment]


def test_an_unchanged_conversation_keeps_its_version(alice):
    c = conversation_with_history(alice)
    first = version(c)
    assert len(first) == 32 and first == version(c)
    live.live_state(c)  # reading and rendering change nothing
    assert version(c) == first


@pytest.mark.parametrize("change", CHANGES, ids=lambda f: f.__name__.strip("_"))
def test_every_kind_of_change_a_panel_shows_changes_the_version(alice, change):
    c = conversation_with_history(alice)
    before = version(c)
    change(c)
    assert version(c) not in ("", before)


def test_two_conversations_never_share_a_version(alice):
    assert version(Conversation.objects.create(owner=alice)) != version(Conversation.objects.create(owner=alice))


def test_no_version_while_the_gauge_depends_on_the_time(alice):
    """A cooldown (or a plugin engine) makes the gauge ask an engine whose answer moves with the
    clock: the connect then always renders."""
    c = conversation_with_history(alice)
    cfg = current_config()
    assert live.state_version(c, dataclasses.replace(cfg, context=dataclasses.replace(cfg.context, engine="a-plugin"))) == ""
    Session.objects.filter(id=session_active(c).id).update(cooldown_until=time.time() + 600)
    assert version(c) == ""
    settings_store.save_group("compression", {"enabled": False})  # nothing is paused then
    assert version(c) != ""


def test_the_connect_of_a_current_page_takes_two_queries_and_no_template(alice, django_assert_max_num_queries):
    c = conversation_with_history(alice)
    shown = version(c)
    rendered = []

    def count(sender, **kwargs):
        rendered.append(kwargs["template"].name)

    template_rendered.connect(count)
    try:
        with django_assert_max_num_queries(2):
            conversation, html = live.connect_state(user=alice, conversation_id=c.id, shown=shown)
    finally:
        template_rendered.disconnect(count)
    assert conversation == c and html == fragments.LIVE_SYNCED and rendered == []


@pytest.mark.parametrize("shown", ["", "0" * 32, "not-a-version"])
def test_the_connect_of_a_stale_or_unknown_page_renders_everything_in_as_many_queries_as_before(
        alice, django_assert_max_num_queries, shown):
    """The ownership check, the settings and the marks, then the live state (pinned at eight with
    its own settings read, here given): nine, as the ownership check and the live state were."""
    c = conversation_with_history(alice)
    with django_assert_max_num_queries(9):
        conversation, html = live.connect_state(user=alice, conversation_id=c.id, shown=shown)
    assert conversation == c and 'id="gauge"' in html and 'id="transcript"' in html


def test_the_connect_refuses_another_users_conversation_whatever_version_it_names(alice, bob):
    c = conversation_with_history(alice)
    assert live.connect_state(user=bob, conversation_id=c.id, shown=version(c)) == (None, "")
    assert selectors.conversation_get_for_user_with_live_marks(user=bob, conversation_id=c.id) is None
