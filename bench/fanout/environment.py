"""The live fan-out benchmark's environment: the processes' variables, the seeded users,
conversations and sessions, and what Redis reports about connections and channel-layer groups."""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from bench import stack_seed

ROOT = Path(__file__).resolve().parents[2]


def bench_env(data_dir: Path, redis_port: int) -> dict:
    env = dict(os.environ)
    for name in ("DATABASE_URL", "HERMES_CELERY_EAGER", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "HERMES_ENV",
                 "HERMES_SERVE_STATIC"):
        env.pop(name, None)
    env.update({
        "HERMES_DATA_DIR": str(data_dir),
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "DJANGO_SETTINGS_MODULE": "hermes_web.settings",
        "HERMES_ENV": "development",
        "PYTHONUNBUFFERED": "1",
        "HERMES_LOG_LEVEL": "WARNING",
    })
    return env


def manage(env: dict, *args: str, timeout: float = 120) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py {args[0]} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


# The benchmark's users (logged in) and conversations, one shell call.
seed = functools.partial(stack_seed.seed, model="sim-claude-200k", username="bench", title="bench", tag="LFB-SEED")


def redis_clients(client) -> int:
    return int(client.info("clients")["connected_clients"])


def group_members(client) -> int:
    """Channel-layer group members left in Redis (channels_redis keys ``asgi:group:<name>``): after a
    pass's sockets closed, anything here is a stale member every later group_send still serves."""
    return sum(client.zcard(key) for key in client.scan_iter(match="asgi:group:*", count=1000))


def redis_connections_by_process(redis_port: int, pids: dict[str, int]) -> dict[str, int]:
    """Established TCP connections to Redis held by each named process (Linux /proc), for
    attributing a change in connected_clients."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == redis_port and cols[3] == "01":
                inodes.add(cols[9])
    counts = {}
    for name, pid in pids.items():
        n = 0
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    n += 1
        except OSError:
            pass
        counts[name] = n
    return counts
