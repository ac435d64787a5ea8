"""Start the real processes of the product for integration tests and benchmarks: the embedded
Redis, the model simulator, Celery workers and Daphne, each a subprocess on a free loopback port,
stopped (and reaped) by `Stack.stop()`."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent


_HANDED_OUT: set[int] = set()


def _reserved() -> set[int]:
    """The test run's own Redis port (chosen by tests/pytest_env.py when the process starts, but
    listened on only once the session's stack starts) and every port already handed out here."""
    url = os.environ.get("REDIS_URL", "")
    port = urlsplit(url).port if url else None
    return _HANDED_OUT | ({port} if port else set())


def free_port() -> int:
    """A loopback port nothing listens on, never one this process has handed out before: a module
    with a stack of its own (a launcher, a benchmark) that ran before the session's stack started
    could otherwise put its own Redis on the port the session's settings already name."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _reserved():
            _HANDED_OUT.add(port)
            return port


def wait_for_port(port: int, proc: subprocess.Popen | None = None, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what or proc.args} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {port} within {timeout}s")


@dataclass
class Stack:
    env: dict
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def _spawn(self, name: str, args: list[str], extra_env: dict | None = None) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")
        env = {**self.env, **(extra_env or {})}
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs[name] = proc
        return proc

    def start_redis(self) -> None:
        from hermes_web.procs import redis_server_binary

        port = urlsplit(self.env["REDIS_URL"]).port
        proc = self._spawn("redis", [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", str(self.log_dir)])
        wait_for_port(port, proc, what="redis")
        self._check_own_redis(port, proc)

    @staticmethod
    def _check_own_redis(port: int, proc: subprocess.Popen) -> None:
        """The server answering on the port must be the one just started: an older one still
        listening there would answer now and be gone later."""
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                pid = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2).info("server")["process_id"]
                break
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if pid != proc.pid:
            raise RuntimeError(f"redis on {port} is process {pid}, not the one started ({proc.pid}, "
                               f"{'exited with ' + str(proc.poll()) if proc.poll() is not None else 'running'})")

    def start_simulator(self, port: int | None = None) -> str:
        port = port or free_port()
        proc = self._spawn("simulator", [sys.executable, "-m", "simulator", "--host", "127.0.0.1", "--port", str(port)])
        wait_for_port(port, proc, what="simulator")
        url = f"http://127.0.0.1:{port}"
        self.env["HERMES_SIMULATOR_URL"] = url
        return url

    def start_worker(self, name: str = "worker", concurrency: int = 4, extra_env: dict | None = None,
                     extra_args: list[str] | None = None) -> subprocess.Popen:
        """extra_args are appended to the celery command line (e.g. ``["--include", "bench.fanout_tasks"]``)."""
        proc = self._spawn(name, [sys.executable, "-m", "celery", "-A", "hermes_web", "worker", "-Q", "agent,compression",
                                  "--pool=threads", f"--concurrency={concurrency}", "--without-mingle",
                                  "--without-gossip", "-n", f"{name}@%h", "-l", "info", *(extra_args or [])], extra_env)
        self.wait_for_log(name, "ready.", proc)
        return proc

    def start_web(self, name: str = "web", port: int | None = None) -> int:
        """The web process as the Procfile starts it."""
        return self.start_procfile_web(name, port)

    def start_plain_daphne(self, name: str = "web", port: int | None = None) -> int:
        """Daphne's own command line, without the Procfile entry's wrapper (for comparisons)."""
        port = port or free_port()
        proc = self._spawn(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                  "hermes_web.asgi:application"])
        wait_for_port(port, proc, what=name)
        return port

    def start_procfile_web(self, name: str = "web", port: int | None = None) -> int:
        """Daphne as the Procfile starts it (`python -m hermes_web.procs web`)."""
        port = port or free_port()
        proc = self._spawn(name, [sys.executable, "-m", "hermes_web.procs", "web", "-b", "127.0.0.1", "-p", str(port),
                                  "hermes_web.asgi:application"])
        wait_for_port(port, proc, what=name)
        return port

    def wait_for_log(self, name: str, needle: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
        path = self.log_dir / f"{name}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{path.read_text()[-3000:]}")
            if path.exists() and needle in path.read_text(errors="replace"):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{name} not ready within {timeout}s:\n{path.read_text()[-3000:]}")

    def kill(self, name: str, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "redis"] + (["redis"] if "redis" in self.procs else []):
            self.kill(name)

    def log(self, name: str) -> str:
        path = self.log_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""
