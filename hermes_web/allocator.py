"""The C allocator of the long-running processes (Daphne, the Celery worker), tuned so that memory
freed after a compaction goes back to the system instead of staying in the process.

A compaction handles a few large strings at once (the transcript the summariser reads, the
request, the summary), on one of the worker's threads. CPython hands every object over 512 bytes
to the C library's ``malloc``. glibc gives each thread that allocates its own arena (up to eight
per core), and raises its threshold for serving a block from ``mmap`` each time such a block is
freed: after the first large strings, later ones come from the arenas' heaps, where a block still
in use above the freed ones keeps the pages. The soak (``bench/soak.py --profile tools``) showed the
worker's and Daphne's resident memory rising in steps of 1–3 MB at each round of compactions while
the Python heap stayed flat (``--tracemalloc``: +0.2 MB traced over the same minutes).

- ``tune()``, once at start, before any thread allocates (the ``hermes_web`` package calls it on
  import): at most ``HERMES_MALLOC_ARENAS`` arenas (2; ``0`` leaves glibc's default and skips the
  tuning), and a fixed ``mmap`` threshold of 128 KiB, so a large block is always mapped on its own
  and unmapped when freed (glibc's default, without its rise).
- ``trim()`` returns the free pages at the top of the heaps and inside them (``malloc_trim``); the
  worker calls it after each compression task.

Elsewhere than glibc (macOS, musl) both do nothing and say so by returning False.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# mallopt() parameters (glibc's malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 * 1024
DEFAULT_ARENAS = 2
ARENAS_ENV = "HERMES_MALLOC_ARENAS"

_libc: ctypes.CDLL | None = None
_tuned = False


def _glibc() -> ctypes.CDLL | None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            lib.gnu_get_libc_version  # noqa: B018 (only glibc has it)
        except (OSError, AttributeError):
            return None
        _libc = lib
    return _libc


def arenas_wanted() -> int:
    """``HERMES_MALLOC_ARENAS`` (an integer from 0 to 64), else 2."""
    raw = os.environ.get(ARENAS_ENV, "").strip()
    if not raw:
        return DEFAULT_ARENAS
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"hermes: {ARENAS_ENV}={raw!r} is not a whole number (0 leaves the C library's default)") from None
    if not 0 <= value <= 64:
        raise SystemExit(f"hermes: {ARENAS_ENV}={value} is out of range: 0 to 64")
    return value


def tune() -> bool:
    """Limit the arenas and fix the mmap threshold (see the module). True when applied."""
    global _tuned
    if _tuned:
        return True
    arenas = arenas_wanted()
    libc = _glibc()
    if libc is None or arenas == 0:
        return False
    # mallopt returns 1 on success.
    _tuned = bool(libc.mallopt(M_ARENA_MAX, arenas)) and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _tuned


def trim() -> bool:
    """Give the heaps' free pages back to the system. True when glibc released some."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.malloc_trim(0))
