"""`make run`'s launcher on embedded defaults: everything comes up, the printed admin login works,
/healthz is green, and Ctrl-C leaves no process behind; a second run needs no cleanup."""
from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.stack import ROOT, free_port

pytestmark = pytest.mark.integration


def descendants(pid: int) -> set[int]:
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


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def wait_healthy(port: int, proc: subprocess.Popen, timeout: float = 90) -> dict:
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


def login(port: int, username: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{port}"
    html = opener.open(base + "/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    data = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token}).encode()
    request = urllib.request.Request(base + "/accounts/login/", data=data, headers={"Referer": base + "/accounts/login/"})
    return opener.open(request).geturl()


def start(env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "hermes_web.launch"], cwd=ROOT, env=env,
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT)


def stop_with_ctrl_c(proc: subprocess.Popen) -> set[int]:
    pids = descendants(proc.pid)
    assert pids, "no child processes were started"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def test_the_run_command_starts_everything_and_ctrl_c_stops_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL", "ANTHROPIC_API_KEY"}}
    web, redis, sim = free_port(), free_port(), free_port()
    env.update(HERMES_DATA_DIR=str(tmp_path / "data"), HERMES_PORT=str(web), HERMES_REDIS_PORT=str(redis),
               HERMES_SIMULATOR_PORT=str(sim), PYTHONUNBUFFERED="1")
    log = tmp_path / "run.log"

    proc = start(env, log)
    try:
        health = wait_healthy(web, proc)
        assert health["status"] == "ok", health
        output = log.read_text()
        password = re.search(r"username: admin\s+password: (\S+)", output).group(1)
        assert login(web, "admin", password).endswith("/")
        with urllib.request.urlopen(f"http://127.0.0.1:{sim}/_sim/health", timeout=5) as response:
            assert json.loads(response.read())["ok"] is True
    finally:
        leftovers = stop_with_ctrl_c(proc)
    assert leftovers == set(), f"processes left behind: {leftovers}\n{log.read_text()[-2000:]}"

    # A second run on the same data folder works without cleanup and prints no new password.
    proc = start(env, log)
    try:
        assert wait_healthy(web, proc)["status"] == "ok"
    finally:
        leftovers = stop_with_ctrl_c(proc)
    assert leftovers == set()
    assert len(re.findall(r"password: ", log.read_text())) == 1
