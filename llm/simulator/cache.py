"""Prompt-cache accounting with Anthropic's semantics (SPEC §10), deterministic so figures can be
checked by hand.

The request is flattened into blocks (`llm.blocks`); the key of the prefix ending at block i is a
chained hash of (API key, model, blocks 0..i) with `cache_control` stripped, so moving a breakpoint
forward still finds the previous prefix.

- Read: the longest cached, unexpired prefix ending at most `LOOKBACK_BLOCKS` blocks before some
  breakpoint (or at it). Its expiry is refreshed (a hit renews the TTL for free).
- Write: when the prefix up to the last breakpoint reaches the model's minimum cacheable length,
  everything after the read up to that breakpoint is written, each block in the TTL bucket of the
  first breakpoint at or after it. An entry is stored for each breakpoint whose own prefix reaches
  the minimum (a shorter prefix is not cacheable on its own), visible to later requests only.
- No breakpoint: no read, no write.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

from llm.blocks import Marker

LOOKBACK_BLOCKS = 20
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_ENTRIES = 100_000


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


class PrefixCache:
    def __init__(self, max_entries: int = MAX_ENTRIES):
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

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

    def account(
        self,
        tokens: Sequence[int],
        hashes: Sequence[str],
        markers: Sequence[Marker],
        *,
        now: float,
        min_tokens: int,
    ) -> CacheResult:
        """Compute read/write for one request and apply its effects (refresh, new entries)."""
        cumulative: list[int] = []
        running = 0
        for t in tokens:
            running += t
            cumulative.append(running)
        total = running
        ttl_at: dict[int, str] = {}
        for marker in markers:
            if 0 <= marker.block_index < len(tokens):
                ttl_at.setdefault(marker.block_index, marker.ttl)
        if not ttl_at:
            return CacheResult(total=total)
        breakpoints = sorted(ttl_at)
        with self._lock:
            read_block = -1
            for bp in breakpoints:
                for j in range(bp, max(-1, bp - LOOKBACK_BLOCKS - 1), -1):
                    if j <= read_block:
                        break
                    if self._live(hashes[j], now) is not None:
                        read_block = j
                        break
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
                for bp in breakpoints:
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
