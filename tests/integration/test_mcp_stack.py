"""MCP servers on the real stack: the worker connects to real servers (`mcp-server-time` and
`mcp-server-git` from PyPI over stdio, and a streamable-HTTP server built with the SDK's own
`MCPServer`), a chat turn calls a tool through the simulator's `call tool` trigger, and the reply
quotes the server's answer. Faults: a server killed mid-call, a call past its timeout, a server
that never starts, a 5 MB result, Stop during a slow call; each ends in a tool error or a stopped
turn, and the next turn works. And the environment an stdio server gets."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compression.models import MCPServer
from sessions import presenters
from sessions.agent.loop import STOPPED_DURING_CALL
from sessions.models import Message, Turn
from sessions.services.turns import turn_stop, turn_submit
from tests.integration.helpers import make_conversation, wait_for, wait_turn
from tests.stack import free_port, wait_for_port

pytestmark = pytest.mark.integration
# What a server answers and how a call fails does not depend on the database backend: the faults
# run on one; the PyPI servers' turns (state rows, F() updates) run on both.
ONE_DATABASE = pytest.mark.one_database

HERE = Path(__file__).resolve().parent
PROBE = str(HERE / "mcp_test_server.py")
BIN = Path(sys.executable).parent


def add_server(name: str, **fields) -> MCPServer:
    """A server row as the admin saves it; the worker's watcher connects within seconds."""
    return MCPServer.objects.create(name=name, **fields)


def connected(server: MCPServer, timeout: float = 60) -> MCPServer:
    def ready():
        server.refresh_from_db()
        return server.state == "connected" and server.tools
    wait_for(ready, timeout, what=f"MCP server {server.name} connected (last error: {server.last_error!r})")
    return server


def turn(user, conversation, text: str, timeout: float = 90) -> Turn:
    submitted = turn_submit(user=user, conversation_id=conversation.id, text=text)
    return wait_turn(submitted.turn, timeout)


def reply(conversation) -> str:
    return Message.objects.filter(conversation=conversation, role="assistant").order_by("seq").last().content


def tool_result(conversation) -> object:
    return Message.objects.filter(conversation=conversation, role="tool").order_by("seq").last().content


def probe(name: str = "probe", **fields) -> MCPServer:
    return connected(add_server(name, command=sys.executable, args=[PROBE, "stdio"], **fields))


@pytest.fixture
def git_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("untracked on purpose\n")
    return repo


def test_time_server_from_pypi_answers_through_a_turn(live, alice):
    server = connected(add_server("time", command="mcp-server-time"))
    assert {t["name"] for t in server.tools} >= {"get_current_time", "convert_time"}
    c = make_conversation(alice, model="sim-claude-200k")
    done = turn(alice, c, 'call tool mcp_time_get_current_time with {"timezone": "Europe/Lisbon"}')
    assert done.status == "done", done.error
    text = reply(c)
    assert text.startswith('tool mcp_time_get_current_time returned: "'), text
    assert '"timezone": "Europe/Lisbon"' in str(tool_result(c)) and "Europe/Lisbon" in text
    # The schemas count in the gauge's split, as their own source.
    parts = {p["kind"]: p["tokens"] for p in presenters.gauge(c)["breakdown"]["parts"]}
    assert parts.get("tools:mcp:time", 0) > 50, parts


def test_git_server_from_pypi_reports_the_repository(live, alice, git_repo):
    connected(add_server("git", command="mcp-server-git", args=["--repository", str(git_repo)]))
    c = make_conversation(alice, model="sim-claude-200k")
    done = turn(alice, c, "call tool mcp_git_git_status with " + json.dumps({"repo_path": str(git_repo)}))
    assert done.status == "done", done.error
    assert reply(c).startswith('tool mcp_git_git_status returned: "Repository status:'), reply(c)
    assert "notes.txt" in str(tool_result(c))
    parts = {p["kind"] for p in presenters.gauge(c)["breakdown"]["parts"]}
    assert "tools:mcp:git" in parts


@ONE_DATABASE
def test_streamable_http_server_built_with_the_sdk(live, alice, tmp_path):
    port = free_port()
    log = open(tmp_path / "http-server.log", "w")
    proc = subprocess.Popen([sys.executable, PROBE, "http", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, what="the MCP HTTP server")
        server = connected(add_server("remote", transport="http", url=f"http://127.0.0.1:{port}/mcp",
                                      headers=json.dumps({"Authorization": "Bearer not-a-real-token"}),
                                      tools_include=["echo", "picture"]))
        assert sorted(t["name"] for t in server.tools) == ["big", "die", "echo", "environment", "picture", "pid", "slow"]
        c = make_conversation(alice, model="sim-claude-200k")
        # include: only echo and picture are offered.
        done = turn(alice, c, "call tool mcp_remote_slow with {\"seconds\": 0}")
        assert reply(c) == "no tool named mcp_remote_slow is offered"
        done = turn(alice, c, 'call tool mcp_remote_echo with {"text": "over HTTP"}')
        assert done.status == "done", done.error
        assert reply(c) == 'tool mcp_remote_echo returned: "echo: over HTTP"'
        # An image result stays an image (never base64 text in the context).
        done = turn(alice, c, "call tool mcp_remote_picture")
        assert done.status == "done", done.error
        content = tool_result(c)
        assert isinstance(content, list) and content[-1]["type"] == "image_url", content
        assert content[-1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert reply(c) == 'tool mcp_remote_picture returned: ""'
        parts = {p["kind"]: p["tokens"] for p in presenters.gauge(c)["breakdown"]["parts"]}
        assert parts.get("tools:mcp:remote", 0) > 0 and "tools:mcp:remote" in parts
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@ONE_DATABASE
def test_an_stdio_server_gets_none_of_the_applications_secrets(live, alice):
    from django.conf import settings

    probe(env=json.dumps({"PROBE_TOKEN": "configured-value"}))
    c = make_conversation(alice, model="sim-claude-200k")
    assert turn(alice, c, "call tool mcp_probe_environment").status == "done"
    seen = dict(line.split("=", 1) for line in str(tool_result(c)).splitlines() if "=" in line)
    assert seen["PROBE_TOKEN"] == "configured-value"
    assert str(BIN) in seen["PATH"].split(":")
    leaked = {k for k in seen if k.startswith(("HERMES_", "DJANGO", "CELERY", "ANTHROPIC", "OPENAI"))
              or k in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL", "PYTHONPATH")}
    assert leaked == set(), leaked
    secrets = [settings.SECRET_KEY, live.env["DATABASE_URL"], live.env["REDIS_URL"], live.env["HERMES_SIMULATOR_URL"]]
    assert not [s for s in secrets if s and s in str(tool_result(c))]
    assert set(seen) <= {"PROBE_TOKEN", "PATH", "HOME", "LOGNAME", "SHELL", "TERM", "USER", "LC_CTYPE"}, set(seen)
    # Its own process group (the worker's signals to its group do not reach it, and it is stopped as a group).
    assert turn(alice, c, "call tool mcp_probe_pid").status == "done"
    pid, group = map(int, str(tool_result(c)).split())
    assert pid == group


@ONE_DATABASE
def test_a_server_killed_mid_call_is_a_tool_error_and_restarts_on_next_use(live, alice):
    server = probe()
    c = make_conversation(alice, model="sim-claude-200k")
    done = turn(alice, c, 'call tool mcp_probe_die with {"after": 0.3}')
    assert done.status == "done", done.error
    assert str(tool_result(c)).startswith("Error: MCP server 'probe' stopped during the call to die")
    assert reply(c).startswith('tool mcp_probe_die returned: "Error: MCP server')
    server.refresh_from_db()
    assert server.failures == 1 and "stopped during the call" in server.last_error
    done = turn(alice, c, 'call tool mcp_probe_echo with {"text": "back"}')
    assert done.status == "done" and reply(c) == 'tool mcp_probe_echo returned: "echo: back"'
    server.refresh_from_db()
    assert server.state == "connected" and server.failures == 0


@ONE_DATABASE
def test_a_call_past_its_timeout_is_a_tool_error(live, alice):
    probe(timeout=1.5)
    c = make_conversation(alice, model="sim-claude-200k")
    done = turn(alice, c, 'call tool mcp_probe_slow with {"seconds": 20}')
    assert done.status == "done", done.error
    assert "timed out after 1.5 s" in str(tool_result(c)), tool_result(c)
    done = turn(alice, c, 'call tool mcp_probe_echo with {"text": "next"}')
    assert done.status == "done" and reply(c) == 'tool mcp_probe_echo returned: "echo: next"'


@ONE_DATABASE
def test_a_server_that_never_starts_is_shown_with_its_reason_and_the_chat_goes_on(live, alice):
    missing = add_server("missing", command="/nonexistent/mcp-server")
    silent = add_server("silent", command="sleep", args=["600"], connect_timeout=1.5)
    wait_for(lambda: MCPServer.objects.filter(state="failing", name__in=["missing", "silent"]).count() == 2, 60,
             what="both servers failing")
    missing.refresh_from_db()
    silent.refresh_from_db()
    assert "could not start" in missing.last_error and "No such file" in missing.last_error
    assert silent.last_error == "did not answer within 1.5 s"
    c = make_conversation(alice, model="sim-claude-200k")
    assert turn(alice, c, "call tool mcp_missing_anything").status == "done"
    assert reply(c) == "no tool named mcp_missing_anything is offered"
    assert turn(alice, c, "hello after the failures").status == "done"
    assert reply(c).startswith('You said: "hello after the failures')


@ONE_DATABASE
def test_a_server_that_stops_starting_after_it_listed_tools_is_a_tool_error_then_down(live, alice):
    server = probe()
    c = make_conversation(alice, model="sim-claude-200k")
    # Broken after its tools were listed: the listing stays offered until the server is down.
    MCPServer.objects.filter(id=server.id).update(command="/nonexistent/probe")
    errors = []
    while server.state != "down" and len(errors) < 4:
        done = turn(alice, c, 'call tool mcp_probe_echo with {"text": "x"}')
        assert done.status == "done", done.error
        errors.append(str(tool_result(c)))
        server.refresh_from_db()
    assert errors and all("could not start" in e for e in errors), errors
    assert server.state == "down" and server.failures >= 3
    assert turn(alice, c, 'call tool mcp_probe_echo with {"text": "x"}').status == "done"
    assert reply(c) == "no tool named mcp_probe_echo is offered"  # left out once down


@ONE_DATABASE
def test_a_result_of_five_megabytes_is_cut_with_a_marker(live, alice):
    probe()
    c = make_conversation(alice, model="sim-claude-200k")
    done = turn(alice, c, 'call tool mcp_probe_big with {"size": 5000000}')
    assert done.status == "done", done.error
    content = str(tool_result(c))
    assert len(content) <= 20_000 and "[output truncated: 5,000,000 chars total" in content
    assert reply(c) == 'tool mcp_probe_big returned: "' + ("0123456789abcdef" * 13)[:200] + '"'
    assert turn(alice, c, 'call tool mcp_probe_echo with {"text": "after"}').status == "done"


@ONE_DATABASE
def test_stop_during_a_slow_call_ends_the_turn_and_the_next_one_works(live, alice, tmp_path):
    probe()
    c = make_conversation(alice, model="sim-claude-200k")
    started = tmp_path / "started"
    submitted = turn_submit(user=alice, conversation_id=c.id, text="call tool mcp_probe_slow with "
                            + json.dumps({"seconds": 60, "started": str(started)}))
    wait_for(started.exists, 60, what="the server to start the slow call")
    turn_stop(user=alice, conversation_id=c.id)
    stopped = wait_for(lambda: Turn.objects.filter(id=submitted.turn.id, status="stopped").first(), 15,
                       what="the turn stopped")
    assert stopped.status == "stopped"
    assert tool_result(c) == STOPPED_DURING_CALL
    done = turn(alice, c, 'call tool mcp_probe_echo with {"text": "after stop"}')
    assert done.status == "done" and reply(c) == 'tool mcp_probe_echo returned: "echo: after stop"'


@ONE_DATABASE
def test_a_conversation_can_switch_a_server_off(live, alice):
    from sessions.services.mcp import conversation_switch

    probe()
    connected(add_server("time", command="mcp-server-time"))
    c = make_conversation(alice, model="sim-claude-200k")
    off, _ = conversation_switch(conversation=c, on=["time"])
    assert off == ["probe"]
    c.refresh_from_db()
    parts = {p["kind"] for p in presenters.gauge(c)["breakdown"]["parts"]}
    assert "tools:mcp:time" in parts and "tools:mcp:probe" not in parts
    assert turn(alice, c, 'call tool mcp_probe_echo with {"text": "x"}').status == "done"
    assert reply(c) == "no tool named mcp_probe_echo is offered"
    assert turn(alice, c, 'call tool mcp_time_get_current_time with {"timezone": "UTC"}').status == "done"
    assert reply(c).startswith('tool mcp_time_get_current_time returned: "{')


@ONE_DATABASE
def test_reload_makes_the_worker_reconnect_and_brings_a_down_server_back(live, alice):
    from compression.mcp_config import server_reload

    server = probe()
    c = make_conversation(alice, model="sim-claude-200k")
    assert turn(alice, c, "call tool mcp_probe_pid").status == "done"
    first = str(tool_result(c)).split()[0]
    MCPServer.objects.filter(id=server.id).update(state="down", failures=3, last_error="failed three times")
    assert turn(alice, c, "call tool mcp_probe_pid").status == "done"
    assert reply(c) == "no tool named mcp_probe_pid is offered"
    reloaded = server_reload("probe")

    def back():
        server.refresh_from_db()
        return server.state == "connected" and server.state_generation == reloaded.generation
    wait_for(back, 30, what="the worker to reconnect after Reload")
    assert server.failures == 0 and server.last_error == ""
    assert turn(alice, c, "call tool mcp_probe_pid").status == "done"
    assert str(tool_result(c)).split()[0] != first  # a new server process
