"""Prompt-cache accounting with Anthropic's documented semantics (SPEC §10, docs/simulator.md),
deterministic so figures can be checked by hand.

The request is flattened into blocks (`simulator.blocks`); the key of the prefix ending at block i
is a chained hash of (API key, model, blocks 0..i) with `cache_control` stripped, so moving a
breakpoint forward still finds the previous prefix.

What the documentation states, in both modes:
- Read: A = the longest cached, unexpired prefix found by walking back from a breakpoint over at
  most `LOOKBACK_POSITIONS` positions, the breakpoint itself counting as the first (a run of
  consecutive `tool_use` or `tool_result` blocks is one position). A hit refreshes that entry.
- Write: B = the last 1h breakpoint after A (or A), C = the last breakpoint; B - A is billed as a
  1h write and C - B as a 5m write, provided the prefix up to C reaches the model's minimum
  cacheable length. Every breakpoint after A whose own prefix reaches the minimum stores an entry
  with its own TTL, visible to later requests only.
- No breakpoint: no read, no write.

What it leaves unstated, by mode (`MODES`; `HERMES_SIM_CACHE`):
- `documented` (the default, conservative): a hit refreshes the entry at the TTL it was stored
  with, and a breakpoint at or before A stores nothing, so marking an already cached prefix
  `ttl: "1h"` again bills a read and leaves the entry's 5m lifetime as it was.
- `optimistic`: every breakpoint whose prefix reaches the minimum (re)stores its entry with its
  own TTL whenever that outlives the entry's current expiry, so that re-pin turns a 5m entry into
  a 1h one at no charge.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from simulator.blocks import Marker

LOOKBACK_POSITIONS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_ENTRIES = 100_000
DOCUMENTED = "documented"
OPTIMISTIC = "optimistic"
MODES = (DOCUMENTED, OPTIMISTIC)


@dataclass
class Entry:
    ttl: str
    tokens: int
    expires: float


@dataclass(frozen=True)
class CacheResult:
    total: int
    read: int = 0
    write_5m: int = 0
    write_1h: int = 0
    read_block: int = -1  # index of the last block of the prefix read, -1 = miss

    @property
    def write(self) -> int:
        return self.write_5m + self.write_1h

    @property
    def input(self) -> int:
        return self.total - self.read - self.write


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"cache mode must be one of {', '.join(MODES)} (got {mode!r})")
    return mode


class PrefixCache:
    def __init__(self, max_entries: int = MAX_ENTRIES, mode: str = DOCUMENTED):
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries
        self.mode = check_mode(mode)

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _live(self, key: str, now: float) -> Entry | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.expires <= now:
            del self._entries[key]
            return None
        return entry

    def _purge(self, now: float) -> None:
        for key in [k for k, e in self._entries.items() if e.expires <= now]:
            del self._entries[key]
        if len(self._entries) > self.max_entries:
            oldest = sorted(self._entries.items(), key=lambda kv: kv[1].expires)
            for key, _ in oldest[: len(self._entries) - self.max_entries]:
                del self._entries[key]

    def _read_point(self, hashes: Sequence[str], breakpoints: list[int], positions: Sequence[int], now: float) -> int:
        """The last block of the longest live prefix within some breakpoint's lookback, or -1."""
        read_block = -1
        for bp in breakpoints:
            first_position = positions[bp] - LOOKBACK_POSITIONS + 1
            j = bp
            while j > read_block and positions[j] >= first_position:
                if self._live(hashes[j], now) is not None:
                    read_block = j
                    break
                j -= 1
        return read_block

    def account(
        self,
        tokens: Sequence[int],
        hashes: Sequence[str],
        markers: Sequence[Marker],
        *,
        now: float,
        min_tokens: int,
        positions: Sequence[int] | None = None,
    ) -> CacheResult:
        """Compute read/write for one request and apply its effects (refresh, new entries).

        `positions` are the blocks' lookback positions (`blocks.lookback_positions`); without
        them every block is a position of its own."""
        cumulative: list[int] = []
        running = 0
        for t in tokens:
            running += t
            cumulative.append(running)
        total = running
        if positions is None:
            positions = range(len(tokens))
        ttl_at: dict[int, str] = {}
        for marker in markers:
            if 0 <= marker.block_index < len(tokens):
                ttl_at.setdefault(marker.block_index, marker.ttl)
        if not ttl_at:
            return CacheResult(total=total)
        breakpoints = sorted(ttl_at)
        with self._lock:
            read_block = self._read_point(hashes, breakpoints, positions, now)
            read = cumulative[read_block] if read_block >= 0 else 0
            if read_block >= 0:
                hit = self._entries[hashes[read_block]]
                hit.expires = now + TTL_SECONDS[hit.ttl]
            last = breakpoints[-1]
            write = {"5m": 0, "1h": 0}
            if cumulative[last] >= min_tokens:
                bp_iter = iter(breakpoints)
                covering = next(bp_iter)
                for k in range(read_block + 1, last + 1):
                    while covering < k:
                        covering = next(bp_iter)
                    write[ttl_at[covering]] += tokens[k]
                stored = breakpoints if self.mode == OPTIMISTIC else [bp for bp in breakpoints if bp > read_block]
                for bp in stored:
                    if cumulative[bp] < min_tokens:
                        continue
                    ttl = ttl_at[bp]
                    expires = now + TTL_SECONDS[ttl]
                    existing = self._entries.get(hashes[bp])
                    if existing is None or existing.expires < expires:
                        self._entries[hashes[bp]] = Entry(ttl, cumulative[bp], expires)
                self._purge(now)
        return CacheResult(
            total=total, read=read, write_5m=write["5m"], write_1h=write["1h"], read_block=read_block
        )
