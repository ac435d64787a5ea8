"""The web process keeps no database connection per HTTP request (hermes_web/asgi.py): Django runs
each ASGI request on a thread of its own, and a SQLite connection kept for reuse there (the embedded
default keeps them a minute) was never reused; it stayed open, with its page cache, until the
collector found it (58 open after a few thousand page loads, and about 35 MB more). Counted as the
descriptors Daphne holds on the database file after concurrent page loads through the real server,
on a stack of its own on the embedded defaults (no DATABASE_URL)."""
from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench.fanout.environment import bench_env, manage, seed
from tests.integration.helpers import wait_for
from tests.stack import Stack, free_port

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stack, on the embedded defaults


def open_files(pid: int, path: Path) -> int:
    name = os.path.realpath(path)
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            count += os.path.realpath(os.readlink(fd)) == name
        except OSError:
            pass
    return count


def test_page_loads_leave_no_connection_open_in_the_web_process():
    base = Path(tempfile.mkdtemp(prefix="hermes-web-connections-"))
    (base / "logs").mkdir()
    env = bench_env(base / "data", free_port())
    stack = Stack(env=env, log_dir=base / "logs")
    try:
        manage(env, "migrate", "--noinput")
        stack.start_redis()
        port = stack.start_web()
        seeded = seed(env, users=1, conversations=2)
        cookie = seeded["users"][0]["cookie"]
        urls = [f"http://127.0.0.1:{port}/conversations/{c['id']}/" for c in seeded["conversations"]]

        def load(i: int) -> int:
            request = urllib.request.Request(urls[i % len(urls)], headers={"Cookie": f"sessionid={cookie}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                return response.status

        with ThreadPoolExecutor(8) as pool:  # as browsers do: several requests at once
            assert set(pool.map(load, range(300))) == {200}
        # A request closes its connection just after its response went out, so the last few may
        # still be closing; the socket consumer's long-lived thread may keep one. Left open, the
        # 300 requests' connections stay (73 before the change) until the collector runs.
        database = base / "data" / "hermes.sqlite3"
        wait_for(lambda: open_files(stack.procs["web"].pid, database) <= 2, timeout=15,
                 what="the web process to close its requests' connections to the database file")
    finally:
        stack.stop()
        shutil.rmtree(base, ignore_errors=True)
