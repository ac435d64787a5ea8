"""`make run`: check the configuration, migrate, ensure an admin login, then start every process
under honcho (Procfile). Bad configuration stops here with one line naming the variable."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hermes_web.config import BASE_DIR, ConfigError, env_int

PY = sys.executable


def fail(message: str) -> None:
    print(f"hermes: {message}", file=sys.stderr)
    raise SystemExit(2)


def port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(BASE_DIR / "manage.py"), *args], env=env, capture_output=True, text=True)


def main() -> None:
    env = dict(os.environ)
    env["PATH"] = str(Path(PY).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        from hermes_web import config, settings  # noqa: F401  (settings validates the rest)

        redis_url = config.redis_url()
        db = config.database_config()
        config.check_database_driver(db)
        web_port = env_int("HERMES_PORT", 8000, minimum=1, maximum=65535)
        sim_port = env_int("HERMES_SIMULATOR_PORT", 8765, minimum=1, maximum=65535)
        redis_port = env_int("HERMES_REDIS_PORT", 6390, minimum=1, maximum=65535)
    except ConfigError as exc:
        fail(str(exc))

    processes = ["web", "worker"]
    if config.redis_is_embedded():
        if not port_free(redis_port):
            fail(f"HERMES_REDIS_PORT: port {redis_port} is already in use (set HERMES_REDIS_PORT to a free port, or REDIS_URL to use that Redis)")
        processes.insert(0, "redis")
    else:
        from hermes_web.probes import redis_ping

        reason = redis_ping(redis_url, wait=2)
        if reason:
            fail(f"REDIS_URL: Redis is unreachable ({reason})")
    if not port_free(web_port):
        fail(f"HERMES_PORT: port {web_port} is already in use (set HERMES_PORT to a free port)")
    if not env.get("ANTHROPIC_API_KEY"):
        if not port_free(sim_port):
            fail(f"HERMES_SIMULATOR_PORT: port {sim_port} is already in use (set HERMES_SIMULATOR_PORT to a free port)")
        processes.append("simulator")

    for step in (["migrate", "--noinput"], ["check", "--fail-level", "ERROR"]):
        result = manage(*step, env=env)
        if result.returncode != 0:
            lines = (result.stderr or result.stdout).strip().splitlines()
            fail(f"`manage.py {' '.join(step)}` failed: {lines[-1] if lines else 'no output'}")
    result = manage("ensure_admin", env=env)
    print(result.stdout.strip())
    print(f"Hermes Web: http://127.0.0.1:{web_port}/  (Ctrl-C stops every process)")
    if "simulator" in processes:
        print(f"No ANTHROPIC_API_KEY: the offline model simulator answers on 127.0.0.1:{sim_port}.")
    sys.stdout.flush()
    honcho = str(Path(PY).parent / "honcho")
    os.execve(honcho, [honcho, "-f", str(BASE_DIR / "Procfile"), "-d", str(BASE_DIR), "start", *processes], env)


if __name__ == "__main__":
    main()
