"""Chat turns on the fast tier, against the in-process simulator over HTTP with Celery eager:
a queue that keeps order, cancel, stop (mid-stream and between tool calls), failures stored in the
transcript with Retry, regenerate and edit with the replaced messages archived, the partial text
saved while a reply streams, and a send that answers when the task queue is unreachable."""
from __future__ import annotations

import pytest
from django.urls import reverse

from sessions import live
from sessions.agent import loop
from sessions.agent.loop import turn_drain
from sessions.models import ApiCall, Conversation, Message, Turn
from sessions.services import turn_end
from sessions.services import turns as turns_service
from sessions.services.context import context_messages, session_active, session_start
from sessions.services.turns import TurnRejected, turn_cancel, turn_edit, turn_regenerate, turn_retry, turn_submit
from sessions.transcript import transcript, turns_shown
from simulator import parse_fault

HTMX = {"HTTP_HX_REQUEST": "true"}
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _wiring(eager_simulator):
    """Every test here talks to the shared simulator (tests/web/conftest.py)."""


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


@pytest.fixture
def queued_only(django_capture_on_commit_callbacks):
    """Submit without running: the turns wait as they would behind a running one."""
    def submit(user, conversation, text):
        with django_capture_on_commit_callbacks(execute=False):
            return turn_submit(user=user, conversation_id=conversation.id, text=text).turn
    return submit


def run(user, conversation, text, capture):
    with capture(execute=True):
        turn = turn_submit(user=user, conversation_id=conversation.id, text=text).turn
    turn.refresh_from_db()
    return turn


def texts(conversation, **filters) -> list[tuple[str, str]]:
    rows = Message.objects.filter(conversation=conversation, **filters).order_by("id")
    return [(m.role, m.content if isinstance(m.content, str) else "") for m in rows]


# ---------------------------------------------------------------- the queue keeps order

def test_a_message_sent_during_a_turn_enters_the_history_after_that_turns_reply(alice, conversation, queued_only):
    first = queued_only(alice, conversation, "first question")
    second = queued_only(alice, conversation, "second question")
    # Queued: stored on the turn, not in the model's history yet.
    assert not Message.objects.filter(conversation=conversation).exists()
    assert [t.text for t in turns_shown(conversation)] == ["first question", "second question"]
    assert turn_drain(conversation_id=conversation.id) is True
    first.refresh_from_db(), second.refresh_from_db()
    assert first.status == second.status == "done"
    history = texts(conversation)
    assert [role for role, _ in history] == ["user", "assistant", "user", "assistant"]
    # Each question got its own answer: the second request ended with the second question, not
    # with an assistant message the model would have continued as a prefill.
    assert history[1][1].startswith('You said: "first question"')
    assert history[3][1].startswith('You said: "second question"')
    assert first.user_message.content == "first question" and second.user_message.content == "second question"


def test_a_drain_leaves_a_turn_whose_hygiene_compaction_has_not_run_to_that_compaction(alice, conversation, queued_only):
    """A worker still draining the conversation must not take a new turn past the compaction that
    gateway hygiene queued for it: the compression job hands the turn over when it ends."""
    from sessions.models import CompressionEvent

    first = queued_only(alice, conversation, "first question")
    turn_drain(conversation_id=conversation.id)
    second = queued_only(alice, conversation, "second question")
    # As turn_submit records it when hygiene fires (the job itself is not run here).
    event = CompressionEvent.objects.create(conversation=conversation, session=session_active(conversation),
                                            trigger="hygiene", status="queued", phase="queued")
    assert turn_drain(conversation_id=conversation.id) is True
    first.refresh_from_db(), second.refresh_from_db()
    assert first.status == "done" and second.status == "queued"
    # A hygiene compaction of an earlier turn, or one that has ended, holds nothing back.
    event.status = "compressed"
    event.save(update_fields=["status"])
    assert turn_drain(conversation_id=conversation.id) is True
    second.refresh_from_db()
    assert second.status == "done"


def test_a_queued_message_can_be_cancelled_and_never_enters_the_history(alice, conversation, queued_only):
    first = queued_only(alice, conversation, "first question")
    second = queued_only(alice, conversation, "never mind this one")
    assert turn_cancel(user=alice, conversation_id=conversation.id, turn_id=second.id).status == "cancelled"
    turn_drain(conversation_id=conversation.id)
    first.refresh_from_db(), second.refresh_from_db()
    assert (first.status, second.status) == ("done", "cancelled")
    assert "never mind this one" not in [t for _, t in texts(conversation)]
    with pytest.raises(TurnRejected, match="no longer waiting"):
        turn_cancel(user=alice, conversation_id=conversation.id, turn_id=second.id)
    with pytest.raises(TurnRejected):
        turn_cancel(user=alice, conversation_id=conversation.id, turn_id=first.id)


def test_another_user_cannot_cancel_a_queued_message(alice, bob, conversation, queued_only):
    turn = queued_only(alice, conversation, "mine")
    with pytest.raises(TurnRejected, match="No such conversation"):
        turn_cancel(user=bob, conversation_id=conversation.id, turn_id=turn.id)
    turn.refresh_from_db()
    assert turn.status == "queued"


def test_the_page_lists_queued_messages_below_the_transcript_with_cancel(client, alice, conversation, queued_only):
    queued_only(alice, conversation, "waiting <b>here</b>")
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    queue = page[page.index('id="queue"'):]
    assert 'data-role="queued"' in queue and "waiting &lt;b&gt;here&lt;/b&gt;" in queue and "Cancel" in queue
    assert 'data-role="user"' not in page  # not in the transcript: it has not started


# ---------------------------------------------------------------- stop

def test_stop_mid_stream_keeps_the_partial_text_marked_stopped(alice, conversation, sim, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    sim.sim.faults.push(parse_fault("slow=0.02"), 1)
    monkeypatch.setattr(loop, "PARTIAL_SAVE_SECONDS", 0.1)
    # The stop is read at every event rather than every 0.25 s: on a loaded machine the rest of the
    # stream can arrive in one burst inside a poll interval, and the test is about what a stop
    # keeps, not about the interval.
    monkeypatch.setattr(loop, "STOP_POLL_SECONDS", 0.0)
    seen = {}
    real_delta = live.stream_delta

    def press_stop_after_a_few_deltas(conversation_id, stream_id, text):
        real_delta(conversation_id, stream_id, text)
        seen["deltas"] = seen.get("deltas", 0) + 1
        if seen["deltas"] == 8:
            running = Turn.objects.get(conversation_id=conversation_id, status="running")
            seen["partial"] = running.partial_text  # what a page loaded now would show
            seen["entries"] = transcript(Conversation.objects.get(id=conversation_id))
            turns_service.turn_stop(user=alice, conversation_id=conversation_id)

    monkeypatch.setattr(live, "stream_delta", press_stop_after_a_few_deltas)
    turn = run(alice, conversation, "reply with 400 words about stopping", django_capture_on_commit_callbacks)
    assert turn.status == "stopped" and turn.partial_text is None
    reply = Message.objects.get(conversation=conversation, role="assistant")
    assert reply.stopped and reply.content.startswith('You said: "reply with 400 words')
    assert len(reply.content.split()) < 400  # the stream was closed early
    # The page loaded mid-stream showed the text so far as the streaming entry.
    assert seen["partial"] and reply.content.startswith(seen["partial"])
    assert seen["entries"][-1]["kind"] == "stream" and seen["entries"][-1]["text"] == seen["partial"]
    call = ApiCall.objects.get(conversation=conversation)
    assert call.error == "stopped by the user"
    # The context stays valid: the next turn runs and answers its own question.
    nxt = run(alice, conversation, "and now something else", django_capture_on_commit_callbacks)
    assert nxt.status == "done", nxt.error
    assert texts(conversation)[-1][1].startswith('You said: "and now something else"')


def test_stop_between_tool_calls_runs_no_further_tool_and_answers_every_call(alice, conversation, monkeypatch,
                                                                             django_capture_on_commit_callbacks):
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "a.txt").write_text("alpha\n")
    (conversation.workspace / "b.txt").write_text("beta\n")
    ran = []
    real_run_tool = loop.run_tool
    real_added = live.message_added

    def stop_when_the_calls_arrive(message, **kwargs):
        real_added(message, **kwargs)
        if message.role == "assistant" and message.tool_calls:
            turns_service.turn_stop(user=alice, conversation_id=message.conversation_id)

    def counting_run_tool(name, *args, **kwargs):
        ran.append(name)
        return real_run_tool(name, *args, **kwargs)

    monkeypatch.setattr(live, "message_added", stop_when_the_calls_arrive)
    monkeypatch.setattr(loop, "run_tool", counting_run_tool)
    turn = run(alice, conversation, "read a.txt and read b.txt", django_capture_on_commit_callbacks)
    assert turn.status == "stopped"
    assert ran == []
    session = session_active(conversation)
    context = context_messages(session)
    calls = [c["id"] for c in context[-3]["tool_calls"]]
    results = [(m["tool_call_id"], m["content"]) for m in context[-2:]]
    assert [r[0] for r in results] == calls and all(r[1] == turn_end.NOT_RUN_STOPPED for r in results)
    monkeypatch.setattr(live, "message_added", real_added)
    nxt = run(alice, conversation, "what next?", django_capture_on_commit_callbacks)
    assert nxt.status == "done", nxt.error  # the simulator refuses a tool call without its result


# ---------------------------------------------------------------- failures belong to the transcript

def test_a_failed_turn_is_stored_with_its_reason_shown_where_it_happened_and_retried(
        client, alice, conversation, sim, django_capture_on_commit_callbacks):
    sim.sim.faults.push(parse_fault("500"), 10)  # every SDK retry fails
    turn = run(alice, conversation, "this will fail", django_capture_on_commit_callbacks)
    assert turn.status == "failed" and "model call failed" in turn.error
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    body = page[page.index('id="transcript"'):page.index('id="queue"')]
    assert body.index("this will fail") < body.index('data-role="turn-failed"')
    assert turn.error.split(":")[0] in body and "Retry" in body
    assert 'data-role="streaming"' not in page  # no empty assistant bubble left behind
    sim.sim.faults.clear()
    with django_capture_on_commit_callbacks(execute=True):
        retry = turn_retry(user=alice, conversation_id=conversation.id).turn
    retry.refresh_from_db()
    assert retry.status == "done" and retry.user_message_id == turn.user_message_id
    assert [r for r, _ in texts(conversation)] == ["user", "assistant"]  # the same message, answered once


def test_a_crash_after_the_model_asked_for_tools_answers_the_calls_before_failing(
        alice, conversation, monkeypatch, django_capture_on_commit_callbacks):
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "a.txt").write_text("alpha\n")

    def broken_tool(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(loop, "run_tool", broken_tool)
    turn = run(alice, conversation, "read a.txt", django_capture_on_commit_callbacks)
    assert turn.status == "failed" and "RuntimeError" in turn.error
    context = context_messages(session_active(conversation))
    assert context[-1]["role"] == "tool" and context[-1]["content"] == turn_end.NOT_RUN_FAILED
    monkeypatch.undo()
    nxt = run(alice, conversation, "carry on please", django_capture_on_commit_callbacks)
    assert nxt.status == "done", nxt.error


def test_a_refused_message_answers_422_beside_the_composer(client, alice, conversation, settings):
    settings.HERMES_MAX_MESSAGE_CHARS = 100
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "x" * 101}, **HTMX)
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#composer-error" and response["HX-Reswap"] == "innerHTML"
    assert "too long: 101 characters" in response.content.decode()
    assert not Turn.objects.exists()


def test_an_unknown_command_gets_a_hint_and_no_model_call(client, alice, conversation, sim):
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/compres auth"}, **HTMX)
    assert response.status_code == 422
    body = response.content.decode()
    assert "/compres is not a command" in body and "/compress [topic]" in body and "//" in body
    assert not Turn.objects.exists() and sim.sim.stats()["requests"] == 0


def test_a_path_or_a_double_slash_is_sent_as_text(client, alice, conversation, django_capture_on_commit_callbacks):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=False):
        client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/etc/hosts looks wrong"}, **HTMX)
        client.post(reverse("conversation-send", args=[conversation.id]), {"text": "//help is a word"}, **HTMX)
    assert list(Turn.objects.order_by("id").values_list("text", flat=True)) == ["/etc/hosts looks wrong", "/help is a word"]


# ---------------------------------------------------------------- regenerate and edit

def test_regenerate_archives_the_old_reply_and_answers_again(alice, conversation, sim,
                                                             django_capture_on_commit_callbacks):
    run(alice, conversation, "tell me something", django_capture_on_commit_callbacks)
    old = Message.objects.get(conversation=conversation, role="assistant")
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_regenerate(user=alice, conversation_id=conversation.id).turn
    turn.refresh_from_db()
    assert turn.status == "done" and turn.kind == "regenerate"
    old.refresh_from_db()
    assert old.archived and old.replaced  # kept, out of the context
    context = context_messages(session_active(conversation))
    assert [m["role"] for m in context[1:]] == ["user", "assistant"]
    assert Message.objects.filter(conversation=conversation, role="assistant").count() == 2
    entries = transcript(conversation)
    assert [e.get("replaced") for e in entries if e["kind"] == "message"] == [False, True, False]


def test_edit_replaces_the_last_message_and_sends_the_new_text(alice, conversation, django_capture_on_commit_callbacks):
    run(alice, conversation, "first try", django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_edit(user=alice, conversation_id=conversation.id, text="second try").turn
    turn.refresh_from_db()
    assert turn.status == "done"
    context = context_messages(session_active(conversation))
    assert [m["role"] for m in context[1:]] == ["user", "assistant"]
    assert context[1]["content"] == "second try" and context[2]["content"].startswith('You said: "second try"')
    assert Message.objects.filter(conversation=conversation, replaced=True).count() == 2
    assert Message.objects.filter(conversation=conversation).count() == 4  # nothing deleted


def test_regenerate_is_refused_while_a_turn_waits(alice, conversation, queued_only):
    queued_only(alice, conversation, "waiting")
    with pytest.raises(TurnRejected, match="still running or waiting"):
        turn_regenerate(user=alice, conversation_id=conversation.id)


# ---------------------------------------------------------------- the task queue is away

def test_a_send_while_the_broker_is_unreachable_keeps_the_turn_queued_and_says_so(alice, conversation, settings):
    from hermes_web.celery import app
    from tests.stack import free_port

    app.conf.task_always_eager = False
    previous = app.conf.broker_url
    app.conf.broker_url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    try:
        turn = turn_submit(user=alice, conversation_id=conversation.id, text="hello while down").turn
        notice = turns_service.turn_enqueue(turn.id)
    finally:
        app.conf.broker_url = previous
    assert notice == turns_service.QUEUE_DOWN_NOTICE
    turn.refresh_from_db()
    assert turn.status == "queued" and turn.text == "hello while down"
