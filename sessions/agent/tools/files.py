"""The file tools: read_file, write_file, list_files, search_files.

Each takes the workspace's real path plus the tool's arguments and returns the text the model sees,
raising ToolError for a refusal. None follows a symlink out of the workspace: paths go through
`workspace.resolve()`, and walks never descend into symlinks at all.
"""
from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from sessions.agent.tools.base import ToolError
from sessions.agent.tools.workspace import (
    SNIFF_BYTES,
    bounded_lines,
    display,
    is_inside,
    looks_binary,
    open_no_follow,
    resolve,
)

DEFAULT_READ_LIMIT = 2000
MAX_LIST_ENTRIES = 1000
MAX_SEARCH_MATCHES = 200
MAX_SEARCH_FILE_BYTES = 10 * 1024 * 1024
SEARCH_LINE_CHARS = 10_000  # a match later in a longer line is not found
MATCH_SNIPPET_CHARS = 300
# Listed but not descended (and not searched): bulky trees nobody wants line by line.
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv",
                       ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})
_FOOTER_ROOM = 200


def _regular_file(real: Path, raw: str) -> os.stat_result:
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise ToolError(f"file '{raw}' does not exist") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"'{raw}' is a directory; use list_files to see what it holds")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"'{raw}' is not a regular file")
    return st


def _open_text(real: Path) -> tuple[io.TextIOWrapper, bool]:
    """A UTF-8 text handle on `real` (undecodable bytes replaced) and whether the file looks binary."""
    raw = os.fdopen(open_no_follow(real, os.O_RDONLY), "rb")
    binary = looks_binary(raw.read(SNIFF_BYTES))
    raw.seek(0)
    return io.TextIOWrapper(raw, encoding="utf-8", errors="replace"), binary


def read_file(root: Path, *, path: str, offset: int = 1, limit: int = DEFAULT_READ_LIMIT,
              max_chars: int) -> str:
    """Lines `offset`..`offset+limit-1` (1-based), numbered, within a budget of `max_chars`.

    Reads line by line and stops at the first line it will not show, so the cost is what is
    returned (plus skipping the lines before `offset`), whatever the file's size.
    """
    real = resolve(root, path)
    size = _regular_file(real, path).st_size
    name = display(real, root)
    budget = max(1, max_chars - _FOOTER_ROOM)
    keep = max(1, budget - 40)  # one line (its number and cut marker included) always fits
    shown: list[str] = []
    used, number, stop = 0, 0, ""
    handle, binary = _open_text(real)
    with handle:
        if binary:
            return f"'{name}' is a binary file ({size:,} bytes); its contents are not shown"
        for number, (line, cut) in enumerate(bounded_lines(handle, keep), start=1):
            if number < offset:
                continue
            if number >= offset + limit:
                stop = "limit"
                break
            entry = f"{number:>6}\t{line}" + (f" …[line cut at {keep:,} chars]" if cut else "")
            if shown and used + len(entry) + 1 > budget:
                stop = "budget"
                break
            shown.append(entry)
            used += len(entry) + 1
    if not shown:
        if number == 0:
            return f"'{name}' is empty"
        raise ToolError(f"offset {offset:,} is past the end of '{name}' ({number:,} lines)")
    last = offset + len(shown) - 1
    if stop == "limit":
        shown.append(f"[showing lines {offset:,}-{last:,} of '{name}'; more lines follow: "
                     f"continue with offset={last + 1}]")
    elif stop == "budget":
        shown.append(f"[output truncated: '{name}' is {size:,} bytes; showing lines {offset:,}-{last:,}; "
                     f"use offset/limit to read a part, e.g. offset={last + 1}]")
    return "\n".join(shown)


def write_file(root: Path, *, path: str, content: str) -> str:
    """Create or overwrite a file with `content` (UTF-8), creating parent folders in the workspace."""
    real = resolve(root, path)
    if os.path.isdir(real):
        raise ToolError(f"'{path}' is a directory")
    existed = os.path.lexists(real)
    if existed and not os.path.isfile(real):
        raise ToolError(f"'{path}' is not a regular file")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(f"content is not valid text: {exc.reason}") from None
    real.parent.mkdir(parents=True, exist_ok=True)
    # The parent chain may have changed between resolve() and mkdir; check the real one again.
    if not is_inside(os.path.realpath(real.parent), root):
        raise ToolError(f"path '{path}' is outside the workspace")
    with os.fdopen(open_no_follow(real, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as handle:
        handle.write(data)
    lines = content.count("\n") + (0 if not content or content.endswith("\n") else 1)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {display(real, root)}: {lines:,} lines, {len(content):,} chars"


def _sorted_entries(directory: str | Path) -> list[os.DirEntry]:
    with os.scandir(directory) as it:
        return sorted(it, key=lambda entry: entry.name)


def _walk(start: Path) -> Iterator[tuple[str, os.DirEntry]]:
    """(kind, entry) depth-first in name order; kind is dir, skipped_dir, file, symlink, special or
    unreadable. Symlinks are reported, never followed."""
    stack = [iter(_sorted_entries(start))]
    while stack:
        entry = next(stack[-1], None)
        if entry is None:
            stack.pop()
        elif entry.is_symlink():
            yield "symlink", entry
        elif entry.is_dir(follow_symlinks=False):
            if entry.name in SKIP_DIRS:
                yield "skipped_dir", entry
                continue
            try:
                children = _sorted_entries(entry.path)
            except OSError:
                yield "unreadable", entry
                continue
            yield "dir", entry
            stack.append(iter(children))
        elif entry.is_file(follow_symlinks=False):
            yield "file", entry
        else:
            yield "special", entry


def _list_line(kind: str, entry: os.DirEntry, root: Path) -> str:
    rel = display(Path(entry.path), root)
    if kind == "file":
        return f"{rel} ({entry.stat(follow_symlinks=False).st_size:,} bytes)"
    if kind == "dir":
        return f"{rel}/"
    if kind == "skipped_dir":
        return f"{rel}/ (not descended)"
    if kind == "unreadable":
        return f"{rel}/ (unreadable)"
    if kind == "symlink":
        target = os.path.realpath(entry.path)
        where = display(Path(target), root) if is_inside(target, root) else "outside the workspace"
        return f"{rel} -> {where} (symlink, not followed)"
    return f"{rel} (special file)"


def list_files(root: Path, *, path: str = ".") -> str:
    """Every file (with its size) and folder under `path`, one per line, workspace-relative."""
    real = resolve(root, path)
    if not os.path.exists(real):
        raise ToolError(f"'{path}' does not exist")
    if not os.path.isdir(real):
        return f"{display(real, root)} ({os.path.getsize(real):,} bytes)"
    lines: list[str] = []
    for kind, entry in _walk(real):
        if len(lines) == MAX_LIST_ENTRIES:
            lines.append(f"[listing stopped at {MAX_LIST_ENTRIES:,} entries; list a subfolder for more]")
            break
        lines.append(_list_line(kind, entry, root))
    return "\n".join(lines) if lines else f"'{display(real, root)}' is empty"


def _compile(pattern: str) -> re.Pattern[str]:
    """The pattern as a regex, or as a plain substring when it is not a valid regex."""
    try:
        return re.compile(pattern)
    except re.error:
        return re.compile(re.escape(pattern))


def _snippet(line: str, start: int) -> str:
    text = line.strip()
    if len(text) <= MATCH_SNIPPET_CHARS:
        return text
    begin = max(0, start - (len(line) - len(line.lstrip())) - 100)
    body = text[begin:begin + MATCH_SNIPPET_CHARS]
    return ("…" if begin else "") + body + ("…" if begin + MATCH_SNIPPET_CHARS < len(text) else "")


def search_files(root: Path, *, pattern: str, path: str = ".") -> str:
    """`file:line: text` for each line matching `pattern` in the text files under `path`."""
    if not pattern:
        raise ToolError("pattern is empty")
    regex = _compile(pattern)
    real = resolve(root, path)
    if not os.path.exists(real):
        raise ToolError(f"'{path}' does not exist")
    files: Iterator[Path]
    if os.path.isdir(real):
        files = (Path(entry.path) for kind, entry in _walk(real) if kind == "file")
    else:
        _regular_file(real, path)
        files = iter([real])
    matches: list[str] = []
    too_big = 0
    for file in files:
        if os.path.getsize(file) > MAX_SEARCH_FILE_BYTES:
            too_big += 1
            continue
        handle, binary = _open_text(file)
        with handle:
            if binary:
                continue
            for number, (line, _cut) in enumerate(bounded_lines(handle, SEARCH_LINE_CHARS), start=1):
                found = regex.search(line)
                if found:
                    matches.append(f"{display(file, root)}:{number}: {_snippet(line, found.start())}")
                    if len(matches) == MAX_SEARCH_MATCHES:
                        break
        if len(matches) == MAX_SEARCH_MATCHES:
            matches.append(f"[search stopped at {MAX_SEARCH_MATCHES} matches; narrow the pattern or path]")
            break
    if too_big:
        matches.append(f"[skipped {too_big:,} files over {MAX_SEARCH_FILE_BYTES // (1024 * 1024)} MB]")
    return "\n".join(matches) if matches else f"No matches for '{pattern}' in {display(real, root)}"
