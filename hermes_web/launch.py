"""`make run`: check the configuration, migrate, ensure an admin login, then start every process
of the Procfile under supervisord, which restarts any that exits while the others keep serving.
Bad configuration stops here with one line naming the variable."""
from __future__ import annotations

import fcntl
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

from hermes_web.config import BASE_DIR, ConfigError, env_int
from hermes_web.probes import redis_ping
from hermes_web.procs import supervisor_config
from llm.routes import simulator_needed

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


def append_when_a_file(fd: int) -> None:
    """supervisord writes its own lines through this descriptor and the programs' output through
    a second, append-mode handle of /dev/stdout. Redirected to a file (`make run > run.log`) without
    append mode, the two would overwrite each other."""
    if stat.S_ISREG(os.fstat(fd).st_mode):
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(BASE_DIR / "manage.py"), *args], env=env, capture_output=True, text=True)


def main() -> None:
    env = dict(os.environ)
    env["PATH"] = str(Path(PY).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        # Imported here: importing the settings validates the environment, and raises the
        # ConfigError this reports in one line.
        from hermes_web import config, settings  # noqa: F401

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
        reason = redis_ping(redis_url, wait=2)
        if reason:
            fail(f"REDIS_URL: Redis is unreachable ({reason})")
    if not port_free(web_port):
        fail(f"HERMES_PORT: port {web_port} is already in use (set HERMES_PORT to a free port)")
    if simulator_needed(env):
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
    run_dir = config.data_dir() / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    conf = run_dir / "supervisord.conf"
    conf.touch(mode=0o600)
    conf.chmod(0o600)  # it holds the control socket's password
    conf.write_text(supervisor_config(procfile=BASE_DIR / "Procfile", names=processes, directory=BASE_DIR,
                                      run_dir=run_dir, password=secrets.token_urlsafe(24)))
    supervisorctl = Path(PY).parent / "supervisorctl"
    print(f"A process that exits is restarted; `{supervisorctl} -c {conf} status` lists them.")
    sys.stdout.flush()
    append_when_a_file(sys.stdout.fileno())
    # supervisord replaces this process: Ctrl-C (SIGINT) reaches it and it stops every program.
    supervisord = str(Path(PY).parent / "supervisord")
    os.execve(supervisord, [supervisord, "-n", "-c", str(conf)], env)


if __name__ == "__main__":
    main()
