"""Confinement of tool paths to a conversation's workspace, and bounded reading of files.

Every path a tool touches goes through `resolve()`: it is refused if, relative, it climbs out with
`..`, or if its real path (symlinks resolved) is not inside the workspace's real path. Reading helpers never hold
more than about one line (cut to a bound) of a file in memory, so a 100 MB file costs only what is
returned.
"""
from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from sessions.agent.tools.base import ToolError

SNIFF_BYTES = 8192
_READ_CHUNK = 64 * 1024
# Text control characters; anything else below 0x20 counts against "this is text".
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")


def workspace_root(workspace: Path) -> Path:
    """Create the workspace if missing and return its real path (the confinement boundary)."""
    workspace = Path(workspace)
    workspace.mkdir(parents=True, exist_ok=True)
    return Path(os.path.realpath(workspace))


def is_inside(path: Path | str, root: Path) -> bool:
    path = Path(path)
    return path == root or root in path.parents


def resolve(root: Path, raw: str) -> Path:
    """The real path that `raw` (relative to the workspace, or absolute inside it) names.

    Refuses `..` escapes, absolute paths outside, and symlinks (anywhere on the path) leading out.
    The path need not exist; its existing prefix is resolved.
    """
    if "\0" in raw:
        raise ToolError(f"path {raw!r} contains a NUL byte")
    if os.path.isabs(raw):
        candidate = Path(raw)  # judged by its real path alone: the workspace may be named via a symlink
    else:
        lexical = os.path.normpath(raw)
        if lexical == ".." or lexical.startswith("../"):
            raise ToolError(f"path '{raw}' is outside the workspace")
        candidate = root / raw
    real = Path(os.path.realpath(candidate))
    if not is_inside(real, root):
        raise ToolError(f"path '{raw}' is outside the workspace")
    return real


def display(path: Path, root: Path) -> str:
    """`path` as the model should name it: relative to the workspace, `.` for the root."""
    return Path(os.path.relpath(path, root)).as_posix()


def open_no_follow(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open that refuses a final-component symlink (a swap after `resolve()` cannot lead out)."""
    return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)


def looks_binary(sample: bytes) -> bool:
    """A NUL byte, or mostly non-text bytes in something that is not valid UTF-8."""
    if b"\0" in sample:
        return True
    try:
        # final=False: a multi-byte character cut at the sample's end is not a reason to say binary.
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return False
    except UnicodeDecodeError:
        pass
    odd = sum(1 for b in sample if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7F)
    return odd > len(sample) * 0.1


def bounded_lines(handle: IO[str], keep: int) -> Iterator[tuple[str, bool]]:
    """Each line of a text handle without its newline, cut to `keep` chars, and whether it was cut.

    The rest of an over-long line is read in chunks and dropped, never held whole.
    """
    while True:
        part = handle.readline(keep)
        if not part:
            return
        if part.endswith("\n"):
            yield part[:-1], False
            continue
        cut = False
        while True:
            more = handle.readline(_READ_CHUNK)
            if not more:
                break
            if more != "\n":
                cut = True
            if more.endswith("\n"):
                break
        yield part, cut
