"""The C allocator's tuning (hermes_web/allocator.py), observed through glibc's own figures in a
fresh interpreter each: the number of arenas threads end up with, and whether a large block freed
raises the mmap threshold so that the next one stays in a heap."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hermes_web import allocator

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent(
    """
    import ctypes, json, sys, threading, tempfile
    if sys.argv[1] == "tuned":
        from hermes_web import allocator  # the package's import tunes it, as in the processes
    libc = ctypes.CDLL("libc.so.6")

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]
    libc.mallinfo2.restype = MallInfo2

    # A large block freed, then a smaller large one: mapped on its own only if the threshold stayed.
    big = bytes(4 * 1024 * 1024); del big
    before = libc.mallinfo2().hblks
    kept = bytes(600 * 1024)
    mapped = libc.mallinfo2().hblks - before

    # Eight threads allocating at once, each holding what it allocated until all are done.
    start, done = threading.Barrier(8), threading.Barrier(8)
    def work():
        start.wait()
        held = [bytes(1000 + i % 7) for i in range(20000)]
        done.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()

    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    with tempfile.NamedTemporaryFile(suffix=".xml") as out:
        f = libc.fopen(out.name.encode(), b"w")
        libc.malloc_info(0, f)
        libc.fclose(f)
        heaps = open(out.name).read().count("<heap nr=")
    print(json.dumps({"heaps": heaps, "mapped": mapped}))
    """
)


def probe(mode: str, **env: str) -> dict:
    run_env = {**os.environ, **env}
    run_env.pop(allocator.ARENAS_ENV, None) if allocator.ARENAS_ENV not in env else None
    out = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, env=run_env, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout)


pytestmark = pytest.mark.skipif(allocator._glibc() is None, reason="glibc's allocator only")


def test_the_package_limits_the_arenas_threads_get():
    untuned, tuned = probe("plain"), probe("tuned")
    assert untuned["heaps"] > allocator.DEFAULT_ARENAS, untuned  # the probe does make arenas
    assert tuned["heaps"] <= allocator.DEFAULT_ARENAS, tuned


def test_a_large_block_freed_does_not_move_the_next_ones_into_the_heap():
    assert probe("plain")["mapped"] == 0  # glibc raised its threshold past 600 KiB
    assert probe("tuned")["mapped"] == 1


def test_the_arena_count_is_a_setting_and_zero_leaves_the_default():
    assert probe("tuned", HERMES_MALLOC_ARENAS="4")["heaps"] <= 4
    default = probe("tuned", HERMES_MALLOC_ARENAS="0")
    assert default["heaps"] > allocator.DEFAULT_ARENAS and default["mapped"] == 0


@pytest.mark.parametrize("value, words", [("two", "not a whole number"), ("65", "out of range"), ("-1", "out of range")])
def test_a_bad_arena_count_stops_the_start_with_its_name(monkeypatch, value, words):
    monkeypatch.setenv(allocator.ARENAS_ENV, value)
    with pytest.raises(SystemExit, match=words) as stopped:
        allocator.arenas_wanted()
    assert allocator.ARENAS_ENV in str(stopped.value)


def test_trim_answers_without_failing():
    assert allocator.trim() in (True, False)
