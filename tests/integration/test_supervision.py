"""`make run` supervises its processes: a SIGKILLed worker, then a SIGKILLed Redis, is back within
10 s while the web keeps answering and the other processes keep running; Ctrl-C still stops all."""
from __future__ import annotations

import os
import signal
import socket
import time
import urllib.error
import urllib.request

import pytest

from tests.integration.helpers import (
    launcher_env,
    launcher_start,
    launcher_stop_with_ctrl_c,
    process_alive,
    process_cmdline,
    process_descendants,
    wait_for,
    wait_healthz,
)

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stack, on the embedded defaults

RESTART_LIMIT = 10.0
# How each Procfile process shows in its command line.
SIGNATURES = {"redis": "redis-server", "web": "hermes_web.procs web", "worker": "celery", "simulator": "simulator"}


def programs(launcher_pid: int) -> dict[str, int]:
    """name -> pid of each running Procfile process under the launcher."""
    found = {}
    for pid in process_descendants(launcher_pid):
        if not process_alive(pid):
            continue
        line = process_cmdline(pid)
        for name, signature in SIGNATURES.items():
            if signature in line and not line.startswith("/bin/sh"):
                found[name] = pid
    return found


def web_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def kill_and_watch(launcher, name: str, web_port: int, ready) -> float:
    """SIGKILL one program; the seconds until a new process of it runs and `ready()` holds. The web
    must answer throughout, and the other programs keep their pids."""
    before = programs(launcher.pid)
    victim = before[name]
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()
    unanswered = []
    while True:
        elapsed = time.monotonic() - killed
        assert launcher.poll() is None, f"the launcher exited with {launcher.returncode} after {name} was killed"
        if not web_answers(web_port):
            unanswered.append(round(elapsed, 1))
        now = programs(launcher.pid)
        if now.get(name) not in (None, victim) and ready():
            break
        assert elapsed < RESTART_LIMIT, f"{name} not back within {RESTART_LIMIT}s: running {now}"
        time.sleep(0.2)
    back = time.monotonic() - killed
    assert unanswered == [], f"the web did not answer at {unanswered} s after {name} was killed"
    others = {n: p for n, p in before.items() if n != name}
    assert {n: now.get(n) for n in others} == others, f"other processes changed: {before} -> {now}"
    return back


def test_a_killed_worker_and_a_killed_redis_come_back_while_the_web_keeps_answering(tmp_path):
    env = launcher_env(tmp_path)
    web, redis = int(env["HERMES_PORT"]), int(env["HERMES_REDIS_PORT"])
    log = tmp_path / "run.log"
    launcher = launcher_start(env, log)
    try:
        assert wait_healthz(web, launcher)["status"] == "ok"
        assert set(programs(launcher.pid)) == set(SIGNATURES), programs(launcher.pid)

        readies = log.read_text().count(" ready.")
        worker_back = kill_and_watch(launcher, "worker", web, ready=lambda: log.read_text().count(" ready.") > readies)
        redis_back = kill_and_watch(launcher, "redis", web, ready=lambda: port_open(redis))
        # Everything is green again: the database, the restarted Redis and a worker heartbeat.
        wait_for(lambda: healthz_status(web) == 200, 60, interval=0.5, what="/healthz to be green again")
        print(f"\nunder `make run`: a SIGKILLed worker was running again after {worker_back:.1f}s, "
              f"a SIGKILLed Redis listening again after {redis_back:.1f}s")
    finally:
        leftovers = launcher_stop_with_ctrl_c(launcher) if launcher.poll() is None else set()
    assert leftovers == set(), f"processes left behind: {leftovers}\n{log.read_text()[-2000:]}"


def healthz_status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
