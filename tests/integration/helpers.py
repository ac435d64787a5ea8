"""Shared steps of the integration tier: log in, submit turns and wait for real workers."""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request

from django.test import Client

from sessions.models import CompressionEvent, Conversation, Turn
from sessions.services.context import session_start


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def make_conversation(user, model: str = "sim-claude-64k") -> Conversation:
    conversation = Conversation.objects.create(owner=user, provider="simulator", model=model)
    session_start(conversation=conversation)
    return conversation


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_turn(turn: Turn, timeout: float = 60.0) -> Turn:
    def finished():
        turn.refresh_from_db()
        return turn.status in ("done", "failed")

    wait_for(finished, timeout, what=f"turn {turn.id}")
    return turn


def wait_compressions_settled(conversation: Conversation, timeout: float = 60.0) -> None:
    wait_for(lambda: not CompressionEvent.objects.filter(conversation=conversation, status__in=("queued", "running")).exists(),
             timeout, what="compressions to finish")


def sim_control(stack, path: str, body: dict | None = None) -> dict:
    url = stack.env["HERMES_SIMULATOR_URL"] + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


async def receive_until(ws, needle: str, timeout: float = 15.0) -> str:
    async with asyncio.timeout(timeout):
        while True:
            message = await ws.recv()
            if needle in message:
                return message


# ---------------------------------------------------------------- `make run`'s launcher

def launcher_env(tmp_path) -> dict:
    """The environment of a `make run` on embedded defaults, on free ports and its own data folder;
    the ports are in HERMES_PORT, HERMES_REDIS_PORT and HERMES_SIMULATOR_PORT."""
    import os

    from tests.stack import free_port

    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "ANTHROPIC_API_KEY"}}
    env.update(HERMES_DATA_DIR=str(tmp_path / "data"), HERMES_PORT=str(free_port()),
               HERMES_REDIS_PORT=str(free_port()), HERMES_SIMULATOR_PORT=str(free_port()), PYTHONUNBUFFERED="1")
    return env


def launcher_start(env: dict, log):
    """`python -m hermes_web.launch` (what `make run` runs), its output appended to `log`."""
    import subprocess
    import sys

    from tests.stack import ROOT

    return subprocess.Popen([sys.executable, "-m", "hermes_web.launch"], cwd=ROOT, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def process_descendants(pid: int) -> set[int]:
    from pathlib import Path

    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def process_alive(pid: int) -> bool:
    import os
    from pathlib import Path

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    try:
        return "State:\tZ" not in status.read_text()
    except OSError:
        return False


def process_cmdline(pid: int) -> str:
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_healthz(port: int, proc, timeout: float = 90) -> dict:
    """The body of the first 200 answer of /healthz (the web process up and everything green)."""
    import urllib.error

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, "launcher exited early"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            last = exc.read()
        except OSError as exc:
            last = exc
        time.sleep(0.3)
    raise AssertionError(f"not healthy within {timeout}s: {last}")


def launcher_stop_with_ctrl_c(proc) -> set[int]:
    """SIGINT to the launcher, as Ctrl-C in a terminal; the pids of its processes still alive 10 s
    after it exited."""
    import signal

    pids = process_descendants(proc.pid)
    assert pids, "no child processes were started"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(process_alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if process_alive(p)}
