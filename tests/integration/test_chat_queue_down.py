"""A send while Redis is down (the broker and the channel layer both away): the page answers
within 2 s with a notice that the message is saved, never a 500; the turn row stays queued, and
once Redis is back the stored turn runs when a worker is handed it (as the stale-work sweep does).
A compression requested while Redis is down is the same: asked in under 2 s, left queued, and run
by the worker's own sweep once Redis is back."""
from __future__ import annotations

import time

import pytest

from sessions.models import CompressionEvent, Message, Turn
from sessions.services.compaction import compression_request
from sessions.services.context import message_append, session_active
from sessions.tasks import agent_turn_run
from tests.browser import browser
from tests.integration.helpers import make_conversation, sim_control, wait_for, wait_turn
from tests.integration.test_browser_conversation import login, open_socket

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(autouse=True)
def restore_the_stack(live):
    sim_control(live, "/_sim/faults", {"clear": True})
    yield
    if live.procs.get("redis") is None or live.procs["redis"].poll() is not None:
        live.procs.pop("redis", None)
        live.start_redis()
    if live.procs.get("worker") is None or live.procs["worker"].poll() is not None:
        live.procs.pop("worker", None)
        live.start_worker()


def test_a_send_while_redis_is_down_answers_fast_and_the_turn_runs_later(live, alice):
    conversation = make_conversation(alice)
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        page = b.new_page(viewport={"width": 1440, "height": 900})
        statuses: list[int] = []
        page.on("response", lambda r: statuses.append(r.status) if r.url.endswith("/send") else None)
        login(page, base, "alice", "alice-password-1")
        page.goto(f"{base}/conversations/{conversation.id}/")
        open_socket(page)
        live.kill("redis")
        page.fill("#composer-text", "a question sent while the queue is down")
        started = time.monotonic()
        page.press("#composer-text", "Enter")
        notice = page.locator("#notices .notice.warning", has_text="Your message is saved")
        notice.wait_for(timeout=10_000)
        answered = time.monotonic() - started
        assert statuses == [200]
        assert answered < 2.0, f"the send took {answered:.2f}s"
        assert "runs as soon as the queue is back" in notice.inner_text()
        queued = page.locator("#queue [data-role=queued]")
        assert "a question sent while the queue is down" in queued.inner_text()
        assert page.input_value("#composer-text") == ""
        turn = Turn.objects.get(conversation=conversation)
        assert turn.status == "queued" and turn.text == "a question sent while the queue is down"
        assert not Message.objects.filter(conversation=conversation).exists()
        print(f"\nsend with Redis down answered in {answered:.2f}s")

    live.start_redis()
    agent_turn_run.delay(turn.id)  # what the sweep does for a turn left queued
    turn = wait_turn(turn, timeout=90)
    assert turn.status == "done", turn.error
    reply = Message.objects.filter(conversation=conversation, role="assistant").get()
    assert reply.content.startswith('You said: "a question sent while the queue is down"')


def test_a_compression_asked_while_redis_is_down_answers_fast_and_runs_later(live, alice):
    conversation = make_conversation(alice)
    session = session_active(conversation)
    for i in range(12):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant",
                       content=f"Message {i}: " + "words about the gateway " * 40)
    live.kill("redis")
    started = time.monotonic()
    requested = compression_request(conversation_id=conversation.id, trigger="manual", force=True)
    asked = time.monotonic() - started
    assert asked < 2.0, f"the request took {asked:.2f}s"
    assert requested.enqueued is False
    event = requested.event
    event.refresh_from_db()
    assert event.status == "queued"
    print(f"\ncompression asked with Redis down in {asked:.2f}s")

    live.start_redis()
    # Nobody re-sends it: the worker's sweep finds the queued event once its lease has lapsed.
    done = wait_for(lambda: CompressionEvent.objects.filter(id=event.id, status="compressed").first(),
                    timeout=120, interval=0.5, what="the queued compression to run")
    assert done.messages_after < done.messages_before
