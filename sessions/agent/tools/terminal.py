"""The terminal tool: one shell command in the workspace, bounded in time and output.

The command runs under /bin/sh with the workspace as cwd, in its own session (so its own process
group), with stdin closed and a scrubbed environment (no server secrets leak to the agent). On
timeout the whole group is killed; when the command ends, anything it left running in the group is
killed too, so nothing outlives the call. Output is kept as head and tail within the cap, however
much is printed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
_READ_CHUNK = 64 * 1024
_FOOTER_ROOM = 200


def _environment(root: Path) -> dict[str, str]:
    env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ}
    env.setdefault("PATH", os.defpath)
    env.update(HOME=str(root), PWD=str(root), TERM="dumb", PAGER="cat", GIT_PAGER="cat")
    return env


class _Capture:
    """Drains a pipe, keeping the first and last `keep` bytes and counting the rest."""

    def __init__(self, fd: int, keep: int) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._fd, self._keep = fd, keep
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._fd, _READ_CHUNK):
                self.total += len(chunk)
                room = self._keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    del self.tail[: max(0, len(self.tail) - self._keep)]
        except OSError:
            pass  # what was read is kept

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        omitted = self.total - len(self.head) - len(self.tail)
        if not self.tail:
            return head
        tail = self.tail.decode("utf-8", errors="replace")
        if omitted <= 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        return f"{head}\n[... {omitted:,} bytes of output omitted ...]\n{tail}"


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_terminal(root: Path, *, command: str, timeout: int, max_chars: int) -> tuple[str, bool]:
    """(output ending with its exit code, whether the call failed: a timeout counts, exit != 0 not)."""
    process = subprocess.Popen(
        command, shell=True, cwd=root, env=_environment(root),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True, close_fds=True,
    )
    pgid = process.pid  # start_new_session: the child leads its own group
    capture = _Capture(process.stdout.fileno(), keep=max(1, (max_chars - _FOOTER_ROOM) // 2))
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(pgid)
        process.wait()
        capture.thread.join(timeout=5)
        # A process that left the group (setsid) may still hold the pipe: then the daemon reader
        # keeps the fd until that process ends, and we return what we have.
        if not capture.thread.is_alive():
            process.stdout.close()
    output = capture.text().rstrip("\n")
    if timed_out:
        footer = f"[timed out after {timeout} s; process group killed; exit code: {process.returncode}]"
    else:
        footer = f"[exit code: {process.returncode}]"
    return (f"{output}\n{footer}" if output else footer), timed_out
