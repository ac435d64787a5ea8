"""Concurrency, crashes, scale-out and hostile input on real workers and real Daphne."""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import signal
import urllib.error
import urllib.parse
import urllib.request

import pytest
import websockets

from sessions.models import CompressionEvent, Message, Turn
from sessions.services.compaction import compression_request
from sessions.services.context import session_active
from sessions.services.turns import turn_submit
from tests.integration.helpers import (
    make_conversation,
    receive_until,
    session_cookie,
    sim_control,
    wait_compressions_settled,
    wait_for,
    wait_turn,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def clean_simulator(live):
    sim_control(live, "/_sim/faults", {"clear": True})


def run_turn(user, conversation, text: str) -> Turn:
    turn, _ = turn_submit(user=user, conversation_id=conversation.id, text=text)
    return wait_turn(turn)


def seed(user, conversation, turns: int = 8) -> None:
    for i in range(turns):
        assert run_turn(user, conversation, f"Tell me about topic {i}. " + "context " * 150).status == "done"


def post(port: int, path: str, cookie: str, data: dict) -> tuple[int, str]:
    """A form post through Daphne with the session cookie and a CSRF token, as a browser does."""
    opener = urllib.request.build_opener()
    token = "csrf" + "0" * 28  # any 32-character token, sent as cookie and form field like a browser
    opener.addheaders = [("Cookie", f"sessionid={cookie}; csrftoken={token}")]
    body = urllib.parse.urlencode({**data, "csrfmiddlewaretoken": token}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     headers={"Referer": f"http://127.0.0.1:{port}/", "HX-Request": "true"})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_twenty_simultaneous_compression_requests_compress_once(live, alice):
    conversation = make_conversation(alice)
    seed(alice, conversation)
    cookie = session_cookie(alice)
    path = f"/conversations/{conversation.id}/compress"
    with concurrent.futures.ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: post(live.web_port, path, cookie, {"topic": ""}), range(20)))
    assert all(status == 200 for status, _ in results), results
    wait_compressions_settled(conversation)
    statuses = list(CompressionEvent.objects.filter(conversation=conversation).values_list("status", flat=True))
    assert statuses.count("compressed") == 1, statuses
    assert statuses.count("skipped") == 19
    # Each refused request says why: most found the first one running; one arriving after it had
    # finished is a repeat of a request moments ago. Either way the page tells the truth.
    from sessions.services.compaction import SKIPPED_BUSY, SKIPPED_REPEAT

    reasons = list(CompressionEvent.objects.filter(conversation=conversation, status="skipped")
                   .values_list("reason", flat=True))
    assert set(reasons) <= {SKIPPED_BUSY, SKIPPED_REPEAT}
    assert sum("already running" in body for _, body in results) == reasons.count(SKIPPED_BUSY)
    assert sum("ran moments ago" in body for _, body in results) == reasons.count(SKIPPED_REPEAT)


def test_a_worker_killed_mid_compression_leaves_the_session_intact(live, alice):
    conversation = make_conversation(alice)
    seed(alice, conversation)
    session = session_active(conversation)
    before = list(Message.objects.filter(session=session).values_list("id", "archived", "seq"))
    sim_control(live, "/_sim/faults", {"fault": "slow=30", "count": 1})  # the summary call hangs
    event = compression_request(conversation_id=conversation.id, trigger="manual", force=True).event
    wait_for(lambda: CompressionEvent.objects.filter(id=event.id, phase="summarising").exists(), 30,
             what="the summariser call to start")
    worker = live.procs["worker"]
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    live.procs.pop("worker")
    try:
        session.refresh_from_db()
        assert session.ended_at is None
        assert list(Message.objects.filter(session=session).values_list("id", "archived", "seq")) == before
        # Before the lease expires a new request is refused; after it, the next attempt succeeds.
        assert compression_request(conversation_id=conversation.id, trigger="manual",
                                   force=True).event.status == "skipped"
    finally:
        live.start_worker()
    sim_control(live, "/_sim/faults", {"clear": True})
    retry = wait_for(lambda: (lambda e: e if e.status != "skipped" else None)(
        compression_request(conversation_id=conversation.id, trigger="manual", force=True).event), 30, interval=1,
        what="the lease to expire")
    wait_compressions_settled(conversation)
    retry.refresh_from_db()
    assert retry.status == "compressed", retry.reason
    interrupted = CompressionEvent.objects.get(id=event.id)
    assert interrupted.status == "failed" and "interrupted" in interrupted.reason


def submit_and_close(user, conversation_id, text: str) -> None:
    """turn_submit from a helper thread, closing that thread's database connection after."""
    from django.db import connection

    try:
        turn_submit(user=user, conversation_id=conversation_id, text=text)
    finally:
        connection.close()


def test_a_turn_on_any_worker_streams_to_a_socket_on_any_web_process(live, alice):
    live.start_worker("worker2")
    web2 = live.start_web("web2")
    live.kill("worker")  # the second worker must serve the turn, for a socket on the second web process
    try:
        conversation = make_conversation(alice)
        url = f"ws://127.0.0.1:{web2}/ws/conversations/{conversation.id}/"
        headers = {"Cookie": f"sessionid={session_cookie(alice)}", "Origin": f"http://127.0.0.1:{web2}"}

        async def scenario() -> str:
            async with websockets.connect(url, additional_headers=headers) as ws:
                await receive_until(ws, 'id="gauge"')
                await asyncio.to_thread(submit_and_close, alice, conversation.id, "reply with 40 words about scaling")
                return await receive_until(ws, 'data-role="assistant"', timeout=30)

        message = asyncio.run(scenario())
        assert "Assistant" in message
        wait_turn(Turn.objects.get(conversation=conversation))
        assert "sessions.tasks.agent_turn_run[" in live.log("worker2")
    finally:
        live.kill("worker2")
        live.kill("web2")
        live.start_worker()


def test_path_traversal_and_symlink_escape_reach_the_model_as_tool_errors(live, alice, tmp_path):
    conversation = make_conversation(alice)
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    (conversation.workspace / "link.txt").symlink_to(secret)
    (conversation.workspace / "huge.txt").write_text(("y" * 99 + "\n") * 5_000)
    for text in ("read `../../secret.txt`", "read link.txt", f"read `{secret}`"):
        assert run_turn(alice, conversation, text).status == "done"
    assert run_turn(alice, conversation, "read huge.txt").status == "done"
    tools = list(Message.objects.filter(conversation=conversation, role="tool").order_by("id"))
    assert len(tools) == 4
    for tool in tools[:3]:
        assert tool.content.startswith("Error:") and "workspace" in tool.content
        assert "TOP-SECRET" not in tool.content
    assert len(tools[3].content) <= 21_000 and "truncated" in tools[3].content
    assert not Message.objects.filter(conversation=conversation, content__icontains="TOP-SECRET").exists()


def test_a_ten_megabyte_message_is_rejected_and_nothing_is_stored(live, alice):
    conversation = make_conversation(alice)
    status, body = post(live.web_port, f"/conversations/{conversation.id}/send", session_cookie(alice),
                        {"text": "z" * (10 * 1024 * 1024)})
    assert status == 413
    assert "too large" in body and "Nothing was stored" in body
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not Turn.objects.filter(conversation=conversation).exists()


def test_another_users_conversation_is_a_404_over_http(live, alice, bob):
    conversation = make_conversation(alice)
    status, _ = post(live.web_port, f"/conversations/{conversation.id}/send", session_cookie(bob), {"text": "hi"})
    assert status == 404
    assert not Message.objects.filter(conversation=conversation).exists()
    assert re.match(r"^[0-9a-f-]{36}$", str(conversation.id))
