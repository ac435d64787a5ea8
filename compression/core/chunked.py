"""Phase 3, the reading (SPEC §6): the whole middle reaches the summariser, in chunks when it must.

Guarantees:
- ``plan_summary`` renders every summarised turn once (``serialize_message``: redacted, each message
  over 6,000 chars cut to head and tail as SPEC §6 says) and measures it with the product's
  tokenizer (a plain turn whose stored count is exact is measured from that count, to the same
  figure, without tokenising its text again). When the rendered middle fits what the summariser can take (its window less the
  prompt, the previous summary and the summary's output cap, with 15 % headroom for tokenizer
  differences) it is one chunk; otherwise it is split on message boundaries, oldest first.
  No message is ever left out; a single message larger than a whole chunk is cut inside itself,
  keeping its head and tail around a visible ``[message cut to fit the summariser …]`` marker.
- ``run_summary`` calls the summariser once per chunk, each chunk as large as the call allows
  once the summary it carries is known. The first chunk updates the previous summary when there
  is one; every later chunk updates the running summary with the iterative prompt, so the last
  answer summarises everything. A failure of the primary summariser switches, once, to the
  fallback summariser (the main model) for the rest of the run; the primary's failure is recorded
  so the host can tell staff. Any other failure ends the run with its exception, and the caller
  keeps the original messages (or inserts its local fallback).
- Counts are what the summariser actually read: messages, tokens of the rendered turns, calls made
  (failed ones included). Pure: no clock, no network; the summarisers are injected callables.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .markers import is_summary_only
from .summary import (
    SummariserUnavailable,
    build_summary_prompt,
    clean_summary,
    serialize_message,
    serialized_tokens,
    summary_max_tokens,
)
from .tokens import count_tokens

# cl100k (the product's tokenizer) counts fewer tokens than some providers' own tokenizers do.
SUMMARISER_WINDOW_SHARE = 0.85
MIN_CHUNK_TOKENS = 1_000
BLOCK_SEPARATOR = "\n\n"
_SEPARATOR_TOKENS = 1  # "\n\n" is one cl100k token
CUT_MARKER = "\n...[message cut to fit the summariser: about {kept:,} of {total:,} tokens kept]...\n"
CUT_HEAD_SHARE = 0.7

Summariser = Callable[[str, int], Any]
TextCounter = Callable[[str], int]
ChunkCallback = Callable[[int, int], None]  # (chunk number from 1, number of chunks)


@dataclass(frozen=True)
class Chunk:
    text: str
    messages: int
    tokens: int


@dataclass(frozen=True)
class SummaryPlan:
    """How the middle will be read: its rendered turns and what one summariser call may hold.

    ``blocks`` are the rendered turns with their token counts, each already cut to fit one chunk.
    A call's room for turns is ``limit - overhead - tokens of the summary it updates``; ``chunks``
    is the split expected when each running summary is about the budget long (the preview's count),
    while ``run_summary`` sizes every call from the summary it actually carries.
    """

    blocks: tuple[tuple[str, int], ...]
    single: bool
    limit: int
    overhead: int
    expected_previous: int
    floor: int
    window: int
    messages: int
    tokens: int

    def capacity(self, previous_tokens: int) -> int:
        return max(self.floor, self.limit - self.overhead - previous_tokens)

    @property
    def feasible(self) -> bool:
        """False when not even ``MIN_CHUNK_TOKENS`` of turns fit next to the prompt and the summary."""
        return self.single or self.floor >= MIN_CHUNK_TOKENS

    @property
    def chunks(self) -> tuple[Chunk, ...]:
        if self.single:
            return (_join(self.blocks),)
        if not self.feasible:
            return ()
        out: list[Chunk] = []
        i = 0
        while i < len(self.blocks):
            chunk, i = _take(self.blocks, i, self.capacity(self.expected_previous))
            out.append(chunk)
        return tuple(out)

    def infeasible_reason(self, budget: int) -> str:
        return (
            f"the summariser's window ({self.window:,} tokens) cannot hold the prompt, the previous "
            f"summary and a summary of {budget:,} tokens (room left for turns: {max(0, self.floor):,})"
        )


@dataclass(frozen=True)
class SummaryRun:
    """The outcome of ``run_summary``: the body, or the exception that ended the run."""

    body: str | None
    error: BaseException | None
    calls: int
    messages_read: int
    tokens_read: int
    primary_failure: str = ""

    @property
    def fallback_used(self) -> bool:
        return bool(self.primary_failure)


def _joined_tokens(blocks: Sequence[tuple[str, int]]) -> int:
    """``_join(blocks).tokens`` without building the text."""
    return sum(t for _, t in blocks) + _SEPARATOR_TOKENS * max(0, len(blocks) - 1)


def _join(blocks: Sequence[tuple[str, int]]) -> Chunk:
    return Chunk(BLOCK_SEPARATOR.join(text for text, _ in blocks), len(blocks), _joined_tokens(blocks))


def _take(blocks: Sequence[tuple[str, int]], start: int, capacity: int) -> tuple[Chunk, int]:
    """The chunk of whole blocks from ``start`` that fits ``capacity`` (at least one), and the next index."""
    end, used = start, 0
    while end < len(blocks):
        cost = blocks[end][1] + (_SEPARATOR_TOKENS if end > start else 0)
        if end > start and used + cost > capacity:
            break
        used += cost
        end += 1
    return _join(blocks[start:end]), end


def _cut_to_fit(text: str, tokens: int, capacity: int, counter: TextCounter) -> tuple[str, int]:
    """``text`` cut inside itself to at most ``capacity`` tokens, head and tail around a marker."""
    keep = capacity / tokens if tokens else 1.0
    while True:
        chars = int(len(text) * keep)
        head = int(chars * CUT_HEAD_SHARE)
        tail = chars - head
        marker = CUT_MARKER.format(kept=int(tokens * keep), total=tokens)
        cut = text[:head] + marker + (text[-tail:] if tail > 0 else "")
        n = counter(cut)
        if n <= capacity or chars == 0:
            return cut, n
        keep *= 0.9


def plan_summary(
    turns: Sequence[Mapping[str, Any]],
    *,
    window: int,
    budget: int,
    previous_summary: str | None = None,
    focus_topic: str | None = None,
    extra_context: str | None = None,
    today: datetime.date | str | None = None,
    counter: TextCounter = count_tokens,
) -> SummaryPlan:
    """How ``turns`` will be read by a summariser with a ``window``-token context."""
    rendered: list[tuple[str, int]] = []
    summaries = 0
    for msg in turns:
        block = serialize_message(msg)
        if block is None:
            summaries += int(is_summary_only(msg))  # read as the previous summary, not as a turn
            continue
        # A plain turn's count follows from its stored one (exactly); others are tokenised.
        known = serialized_tokens(msg, block) if counter is count_tokens else None
        rendered.append((block, counter(block) if known is None else known))
    messages = len(rendered) + summaries
    total = _joined_tokens(rendered)

    reserve = summary_max_tokens(budget)
    limit = int(window * SUMMARISER_WINDOW_SHARE) - reserve

    def prompt_tokens(previous: str | None) -> int:
        return counter(
            build_summary_prompt(
                (), budget=budget, previous_summary=previous, focus_topic=focus_topic,
                extra_context=extra_context, today=today, serialized="",
            )
        )

    previous_tokens = counter(previous_summary) if previous_summary else 0
    if total <= limit - prompt_tokens(previous_summary):
        return SummaryPlan(tuple(rendered), True, limit, 0, 0, 0, window, messages, total)
    # The iterative prompt (the longer one) without turns or summary; the summary is added per call.
    overhead = prompt_tokens("x") - counter("x")
    # Worst case for a later call: it carries a running summary as long as the output cap.
    floor = limit - overhead - max(previous_tokens, reserve)
    blocks = tuple(
        _cut_to_fit(text, tokens, floor, counter) if floor >= MIN_CHUNK_TOKENS and tokens > floor else (text, tokens)
        for text, tokens in rendered
    )
    expected = max(previous_tokens, budget)
    return SummaryPlan(blocks, False, limit, overhead, expected, floor, window, messages, _joined_tokens(blocks))


def _next_chunk(plan: SummaryPlan, k: int, i: int, running: str | None, read: int,
                counter: TextCounter) -> tuple[Chunk, int, int]:
    """Chunk ``k`` (from block ``i``, sized for the ``running`` summary it carries), the block after
    it, and the number of calls the run now expects (``read``: tokens read so far)."""
    if plan.single:
        return _join(plan.blocks), len(plan.blocks), 1
    chunk, i = _take(plan.blocks, i, plan.capacity(counter(running) if running else 0))
    # The calls still to come, if each carries a summary about the budget long.
    remaining = max(1, plan.tokens - read - chunk.tokens)
    n = k if i >= len(plan.blocks) else k + math.ceil(remaining / plan.capacity(plan.expected_previous))
    return chunk, i, n


def run_summary(
    plan: SummaryPlan,
    summarisers: Sequence[Summariser | None],
    *,
    budget: int,
    previous_summary: str | None = None,
    focus_topic: str | None = None,
    extra_context: str | None = None,
    today: datetime.date | str | None = None,
    on_chunk: ChunkCallback | None = None,
    counter: TextCounter = count_tokens,
) -> SummaryRun:
    """Summarise every block of ``plan`` in order with ``summarisers[0]`` (then, after a failure of
    it, ``summarisers[1]``); see the module docstring."""
    route = [s for s in summarisers if s is not None]
    primary_failure = ""
    if summarisers and summarisers[0] is None and route:
        primary_failure = "no auxiliary model configured"
    if not route:
        return SummaryRun(None, SummariserUnavailable("no auxiliary model configured"), 0, 0, 0)
    running = previous_summary
    calls = messages = tokens = 0
    current = 0
    k, i = 0, 0
    while k == 0 or i < len(plan.blocks):
        k += 1
        chunk, i, n = _next_chunk(plan, k, i, running, tokens, counter)
        if on_chunk is not None:
            on_chunk(k, n)
        prompt = build_summary_prompt(
            (), budget=budget, previous_summary=running, focus_topic=focus_topic,
            extra_context=extra_context, today=today, serialized=chunk.text,
        )
        while True:
            calls += 1
            try:
                running = clean_summary(route[current](prompt, budget))
                break
            except Exception as exc:  # the summariser is an edge: any failure must leave the session intact
                if current + 1 < len(route) and not primary_failure:
                    primary_failure = f"{type(exc).__name__}: {exc}"[:300]
                    current += 1
                    continue
                return SummaryRun(None, exc, calls, messages, tokens, primary_failure)
        messages += chunk.messages
        tokens += chunk.tokens
    # Standalone summaries in the middle were read as the previous summary.
    messages += plan.messages - len(plan.blocks)
    return SummaryRun(running, None, calls, messages, tokens, primary_failure)
