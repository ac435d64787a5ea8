"""Loaded with `-p tests.pytest_env` before Django settings are imported: every test run gets its
own data folder and a Redis URL on a free loopback port (the integration tier starts the server)."""
from __future__ import annotations

import os
import socket
import tempfile


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


os.environ["HERMES_DATA_DIR"] = tempfile.mkdtemp(prefix="hermes-test-")
os.environ["REDIS_URL"] = f"redis://127.0.0.1:{_free_port()}/0"
os.environ.setdefault("HERMES_ENV", "development")
os.environ.pop("ANTHROPIC_API_KEY", None)
# Short leases so the crash tests see a killed worker's lock expire within seconds.
os.environ["HERMES_COMPRESSION_LOCK_TTL"] = "6"

