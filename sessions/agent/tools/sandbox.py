"""The terminal's sandbox: every command runs inside bubblewrap (Debian's `bubblewrap` package).

What a command sees:
- the system's programs and libraries read-only (/usr, and /bin, /lib… as the host lays them out),
  a few harmless /etc files, and a generated /etc/passwd and /etc/group naming only itself;
- a /proc of its own pid namespace (no server process, no server environment), a minimal /dev and
  a private, size-capped /tmp that vanishes with the command;
- the workspace, bound at its own path: the cwd and the only writable host folder. Nothing else of
  the host exists in there (not the database, the secret key, other workspaces or the project).
It runs as uid 1000 in a user namespace of its own (mapped to the server's uid outside) with no
capability and no way to make further user namespaces, with a clean environment (PATH, HOME = the
workspace, LANG), and without network (an empty network namespace: loopback only) unless the
administrator allows it. Everything it starts lives in its own pid namespace and dies with it.

Nothing ever falls back to an unsandboxed shell: `problem()` says why a sandbox cannot start here,
and a command whose sandbox did not start is reported as a failure (`SandboxUnavailable`).
The bubblewrap binary is `bwrap` on PATH unless the environment variable HERMES_SANDBOX_BWRAP
names another.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sessions.agent.tools.base import ToolError

BWRAP_VARIABLE = "HERMES_SANDBOX_BWRAP"
SANDBOX_UID = 1000
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
TMP_BYTES = 256 * 1024 * 1024
PROBE_TIMEOUT = 15
INSTALL_HINT = "install Debian's bubblewrap package (apt-get install bubblewrap)"
# Top-level names that are links into /usr on a merged-/usr system and folders on an older one.
_SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# /etc entries that hold no secret and that common programs read (the loader, name lookup,
# Debian's alternatives links, time zone, MIME and magic databases, CA certificates). Named one by
# one: a server running as root maps to the sandbox's uid, which then owns root's files, so a
# folder such as /etc/ssl (with its private/) must never be bound whole.
_ETC_ENTRIES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf",
    "hosts", "host.conf", "gai.conf", "protocols", "services", "networks", "mime.types", "magic",
    "magic.mime", "ssl/certs", "ssl/openssl.cnf", "ca-certificates", "os-release", "debian_version",
    "locale.alias",
)
# Run first inside the sandbox: fd 0 is the write end of the start-marker pipe. One byte on it
# proves the sandbox was set up and the command is about to run; then fd 0 becomes /dev/null and
# the command (passed as $0) runs exactly as `sh -c COMMAND` would run it.
_STARTER = 'printf 1 >&0 && exec 0</dev/null && exec /bin/sh -c "$0"'


class SandboxUnavailable(ToolError):
    """No sandbox can start here, so the command did not run (never run unsandboxed instead)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(f"the terminal's sandbox cannot start, so the command did not run: {reason}")


def bwrap_binary() -> str:
    """The bubblewrap executable's path, or `SandboxUnavailable` saying it is missing."""
    configured = os.environ.get(BWRAP_VARIABLE, "").strip()
    found = shutil.which(configured or "bwrap")
    if found is None:
        where = f"{BWRAP_VARIABLE}={configured} is not an executable" if configured else "'bwrap' is not on PATH"
        raise SandboxUnavailable(f"bubblewrap was not found ({where}); {INSTALL_HINT}")
    return found


def environment(root: Path) -> dict[str, str]:
    """The whole environment of a sandboxed command: nothing from the server's."""
    return {"PATH": SANDBOX_PATH, "HOME": str(root), "PWD": str(root), "LANG": "C.UTF-8", "TERM": "dumb",
            "PAGER": "cat", "GIT_PAGER": "cat", "TMPDIR": "/tmp", "USER": "hermes", "LOGNAME": "hermes"}


def _passwd(root: Path) -> bytes:
    return (f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
            f"hermes:x:{SANDBOX_UID}:{SANDBOX_UID}:Hermes workspace:{root}:/bin/sh\n"
            f"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n").encode()


def _group() -> bytes:
    return f"root:x:0:\nhermes:x:{SANDBOX_UID}:\nnogroup:x:65534:\n".encode()


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRS:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    folders = sorted({"/etc", *(f"/etc/{name.rsplit('/', 1)[0]}" for name in _ETC_ENTRIES if "/" in name)})
    for folder in folders:  # bubblewrap would make them 0700: readable as on a host
        args += ["--perms", "0755", "--dir", folder]
    for name in _ETC_ENTRIES:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _data_fd(data: bytes) -> int:
    """A pipe's read end already holding `data` (small enough for the pipe buffer) and its EOF."""
    read, write = os.pipe()
    try:
        os.write(write, data)
    finally:
        os.close(write)
    return read


@dataclass
class Prepared:
    """A sandboxed command ready for Popen: argv, env, stdin (the start marker) and the fds to pass."""

    argv: list[str]
    env: dict[str, str]
    stdin: int
    pass_fds: tuple[int, ...]
    _marker: int
    _open: list[int] = field(default_factory=list)

    def spawned(self) -> None:
        """Close the parent's copies of what only the sandbox needs (after Popen)."""
        for fd in (self.stdin, *self.pass_fds):
            self._close(fd)

    def started(self) -> bool:
        """Whether the command began inside a set-up sandbox (call once the process has ended)."""
        os.set_blocking(self._marker, False)
        try:
            return bool(os.read(self._marker, 1))
        except BlockingIOError:
            return False

    def _close(self, fd: int) -> None:
        if fd in self._open:
            self._open.remove(fd)
            os.close(fd)

    def close(self) -> None:
        for fd in list(self._open):
            self._close(fd)


@contextmanager
def prepare(root: Path, command: str, *, network: bool = False) -> Iterator[Prepared]:
    """The bubblewrap invocation that runs `command` under /bin/sh in workspace `root` (a real path)."""
    binary = bwrap_binary()
    env = environment(root)
    marker, stdin = os.pipe()
    passwd, group = _data_fd(_passwd(root)), _data_fd(_group())
    argv = [
        binary,
        "--unshare-all",  # user (where possible), ipc, pid, net, uts, cgroup
        "--unshare-user",  # even when the server runs as root: no host capability inside
        "--disable-userns",
        "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--hostname", "hermes-sandbox",
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--clearenv",
    ]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    argv += _system_mounts()
    argv += ["--perms", "0644", "--ro-bind-data", str(passwd), "/etc/passwd",
             "--perms", "0644", "--ro-bind-data", str(group), "/etc/group"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    argv += ["--bind", str(root), str(root), "--chdir", str(root)]
    if network:
        resolv = os.path.realpath("/etc/resolv.conf")
        argv += ["--share-net", "--ro-bind-try", resolv, "/etc/resolv.conf"]
    argv += ["--remount-ro", "/"]  # bubblewrap's own root tmpfs: no writing beside the mounts above
    argv += ["--", "/bin/sh", "-c", _STARTER, command]
    prepared = Prepared(argv=argv, env=env, stdin=stdin, pass_fds=(passwd, group), _marker=marker,
                        _open=[marker, stdin, passwd, group])
    try:
        yield prepared
    finally:
        prepared.close()


def problem(*, network: bool = False) -> str | None:
    """Why no sandbox can start here (bubblewrap missing or refused by the kernel), or None if one can.

    Runs `true` in a throwaway workspace with exactly the options a real command gets.
    """
    with tempfile.TemporaryDirectory(prefix="hermes-sandbox-probe-") as folder:
        root = Path(os.path.realpath(folder))
        try:
            with prepare(root, "true", network=network) as box:
                try:
                    result = subprocess.run(box.argv, env=box.env, stdin=box.stdin, stdout=subprocess.PIPE,
                                            stderr=subprocess.STDOUT, pass_fds=box.pass_fds,
                                            timeout=PROBE_TIMEOUT, check=False)
                except subprocess.TimeoutExpired:
                    return f"the sandbox did not start within {PROBE_TIMEOUT} s"
                except OSError as exc:
                    return f"bubblewrap could not be run: {exc.strerror or exc}; {INSTALL_HINT}"
                if box.started() and result.returncode == 0:
                    return None
                said = result.stdout.decode("utf-8", errors="replace").strip()
                return f"bubblewrap failed: {said or f'exit code {result.returncode}'}"
        except SandboxUnavailable as exc:
            return exc.reason
