"""read_file and write_file: numbered lines, offset/limit, binary and huge files, parent folders."""
from __future__ import annotations

import tracemalloc

from sessions.agent.tools import ToolResult, run_tool


def read(workspace, **arguments):
    return run_tool("read_file", arguments, workspace=workspace)


def test_it_reads_a_file_with_line_numbers(workspace):
    (workspace / "notes.txt").write_text("first\nsecond\n\tthird\n")
    assert read(workspace, path="notes.txt") == ToolResult("     1\tfirst\n     2\tsecond\n     3\t\tthird")


def test_it_reads_a_part_with_offset_and_limit(workspace):
    (workspace / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result = read(workspace, path="n.txt", offset=4, limit=2)
    assert result.content == (
        "     4\tline 4\n     5\tline 5\n[showing lines 4-5 of 'n.txt'; more lines follow: continue with offset=6]"
    )
    assert read(workspace, path="n.txt", offset=9).content == "     9\tline 9\n    10\tline 10"


def test_it_reports_an_offset_past_the_end(workspace):
    (workspace / "n.txt").write_text("a\nb\n")
    assert read(workspace, path="n.txt", offset=5) == ToolResult(
        "Error: offset 5 is past the end of 'n.txt' (2 lines)", is_error=True
    )


def test_it_says_a_file_is_empty(workspace):
    (workspace / "e.txt").write_text("")
    assert read(workspace, path="e.txt") == ToolResult("'e.txt' is empty")


def test_it_reports_a_missing_file_and_a_directory(workspace):
    (workspace / "sub").mkdir()
    assert read(workspace, path="nope.txt") == ToolResult("Error: file 'nope.txt' does not exist", is_error=True)
    assert read(workspace, path="sub").content == "Error: 'sub' is a directory; use list_files to see what it holds"


def test_it_says_a_binary_file_is_binary(workspace):
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    result = read(workspace, path="img.png")
    assert result == ToolResult("'img.png' is a binary file (10,256 bytes); its contents are not shown")


def test_it_reads_non_utf8_text_with_replacement(workspace):
    (workspace / "latin.txt").write_bytes("café au lait\n".encode("latin-1"))
    assert read(workspace, path="latin.txt").content == "     1\tcaf\ufffd au lait"


def test_it_caps_a_long_read_and_says_where_to_continue(workspace):
    (workspace / "wide.txt").write_text(("y" * 99 + "\n") * 5000)
    result = read(workspace, path="wide.txt")
    assert len(result.content) <= 20_000
    lines = result.content.splitlines()
    shown = len(lines) - 1
    assert lines[0] == "     1\t" + "y" * 99
    assert lines[-1] == (
        f"[output truncated: 'wide.txt' is 500,000 bytes; showing lines 1-{shown}; "
        f"use offset/limit to read a part, e.g. offset={shown + 1}]"
    )
    assert shown > 150


def test_it_reads_a_part_of_a_huge_file_without_loading_it(workspace):
    with open(workspace / "huge.log", "w") as handle:
        for block in range(60):
            handle.write("".join(f"row {block * 10_000 + i:07d} {'z' * 40}\n" for i in range(1, 10_001)))
    assert (workspace / "huge.log").stat().st_size > 30_000_000
    tracemalloc.start()
    try:
        result = read(workspace, path="huge.log", offset=200_000, limit=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.content.splitlines() == [
        f"200000\trow 0200000 {'z' * 40}",
        f"200001\trow 0200001 {'z' * 40}",
        f"200002\trow 0200002 {'z' * 40}",
        "[showing lines 200,000-200,002 of 'huge.log'; more lines follow: continue with offset=200003]",
    ]
    assert peak < 2_000_000


def test_it_reads_a_huge_single_line_without_loading_it(workspace):
    with open(workspace / "one-line.min.js", "w") as handle:
        for _ in range(50):
            handle.write("q" * 1_000_000)
    tracemalloc.start()
    try:
        result = read(workspace, path="one-line.min.js")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.content) <= 20_000
    assert result.content.startswith("     1\tqqqq")
    assert "…[line cut at 19,760 chars]" in result.content
    assert peak < 2_000_000


def test_it_writes_a_file_creating_parent_folders(workspace):
    result = run_tool("write_file", {"path": "src/app/main.py", "content": "print('hi')\nprint('bye')\n"},
                      workspace=workspace)
    assert result == ToolResult("Created src/app/main.py: 2 lines, 25 chars")
    assert (workspace / "src/app/main.py").read_text() == "print('hi')\nprint('bye')\n"


def test_it_overwrites_a_file(workspace):
    (workspace / "a.txt").write_text("old content that is longer\n")
    result = run_tool("write_file", {"path": "a.txt", "content": "new"}, workspace=workspace)
    assert result == ToolResult("Overwrote a.txt: 1 lines, 3 chars")
    assert (workspace / "a.txt").read_text() == "new"


def test_it_refuses_to_write_over_a_directory(workspace):
    (workspace / "sub").mkdir()
    result = run_tool("write_file", {"path": "sub", "content": "x"}, workspace=workspace)
    assert result == ToolResult("Error: 'sub' is a directory", is_error=True)
    assert (workspace / "sub").is_dir()
