"""The terminal tool: one shell command in the workspace, sandboxed, bounded in time and output.

The command runs under /bin/sh inside bubblewrap (``sandbox``): the workspace is its cwd and the
only writable host folder, it cannot see the server's environment, processes or files, and it has
no network unless the administrator allows it. Where no sandbox can start the call fails with a
clear error; it never runs unsandboxed. The sandbox runs in its own session (so its own process
group) with its own pid namespace: on timeout the whole group is killed, and when the command ends
everything it left running in the sandbox dies with it, so nothing outlives the call. Output is kept
as head and tail within the cap, however much is printed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

from sessions.agent.tools import sandbox

_READ_CHUNK = 64 * 1024
_FOOTER_ROOM = 200


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


def run_terminal(root: Path, *, command: str, timeout: int, max_chars: int,
                 network: bool = False) -> tuple[str, bool]:
    """(output ending with its exit code, whether the call failed: a timeout counts, exit != 0 not).

    Raises ``sandbox.SandboxUnavailable`` (a ``ToolError``) when the sandbox did not start.
    """
    with sandbox.prepare(root, command, network=network) as box:
        return _run(box, timeout=timeout, max_chars=max_chars)


def _run(box: sandbox.Prepared, *, timeout: int, max_chars: int) -> tuple[str, bool]:
    try:
        process = subprocess.Popen(
            box.argv, env=box.env, stdin=box.stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=box.pass_fds, start_new_session=True, close_fds=True,
        )
    except OSError as exc:
        raise sandbox.SandboxUnavailable(
            f"bubblewrap could not be run: {exc.strerror or exc}; {sandbox.INSTALL_HINT}") from None
    box.spawned()
    pgid = process.pid  # start_new_session: the child leads its own group
    stdout = process.stdout
    assert stdout is not None  # stdout=PIPE
    capture = _Capture(stdout.fileno(), keep=max(1, (max_chars - _FOOTER_ROOM) // 2))
    timed_out = False
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(pgid)
        process.wait()
        capture.thread.join(timeout=5)
        # A process that left the group (setsid) dies with the sandbox's pid namespace all the same;
        # should anything still hold the pipe, the daemon reader keeps the fd and we return what we have.
        if not capture.thread.is_alive():
            stdout.close()
    output = capture.text().rstrip("\n")
    if not box.started():
        raise sandbox.SandboxUnavailable(f"bubblewrap failed: {output or f'exit code {process.returncode}'}")
    if timed_out:
        footer = f"[timed out after {timeout} s; process group killed; exit code: {process.returncode}]"
    else:
        footer = f"[exit code: {process.returncode}]"
    return (f"{output}\n{footer}" if output else footer), timed_out
