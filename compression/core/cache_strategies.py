"""Cache-aware breakpoint strategies beyond ``system_and_3`` (SPEC §13.2), measured by
``bench/cache_economics.py`` on two seeded replays under the documented caching rules.

Registered by ``compression.core.caching`` at import, so they are always selectable as
``prompt_caching.strategy``. Each has the registry's signature
``strategy(messages, *, marker, native_anthropic, tools[, hints]) -> CachedRequest``: ``messages`` is a
marker-free deep copy it may modify, ``marker`` carries the configured TTL (``prompt_caching.cache_ttl``).
Every strategy places at most 4 breakpoints, and in prefix order (tools, system, messages) never a
1h marker after a 5m one: 1h markers only ever sit on earlier positions than the configured-TTL ones.

How the cache bills (Anthropic's prompt-caching documentation; SPEC §10; docs/simulator.md): the
read A is the longest cached prefix found within 20 positions back from a breakpoint; B is the last
1h breakpoint after A, C the last breakpoint; B - A is billed as a 1h write (2x base input), C - B
as a 5m write (1.25x), and each breakpoint after A stores an entry for its whole prefix with its
own TTL. Two consequences the strategies rest on:
- a 1h entry is billed at 1h only for the tokens it newly writes, so a 1h breakpoint one short
  message past the read keeps the *whole* prefix readable for an hour for the price of that message;
- a 1h breakpoint on a prefix that is already cached (at or before A) writes nothing: the
  documentation bills it as a read and never says the entry's lifetime grows. The simulator's
  default (documented) mode keeps the entry's own TTL; its optimistic mode promotes it to 1h.

- ``rolling_1h``: on a request that answers tool results (the agent loop's next step, seconds
  after the previous call, so its cache is warm): 1h on the system prompt and on the newest
  assistant message (the model's last reply, the first message this request adds after what the
  previous request cached), the configured TTL on the messages after it. The request so writes
  its short reply at the 1h price and the tool results at the 5m price, and leaves a fresh 1h
  entry covering the conversation up to that reply: a user who pauses 5–60 minutes after the turn
  finds all of it but the last tool results still cached, under the documented rules. A request
  that opens a turn follows the user's pause, whose length is unknown: its cache may have expired,
  and a 1h marker past the read would then bill the whole rewritten prefix at 1h, so it gets
  ``system_and_3``'s placement, unless the caller knows the pause was short (hint ``warm=True``:
  the previous request's 5m entries still live), when the turn's first request marks the previous
  turn's reply 1h as above: chat turns, which call no tool, then keep a 1h entry too. So does the
  first request after a compression (hint
  ``after_compression=True``: the rebuilt context is sent cold). The reply gets 1h only when it is
  at most ``ROLLING_MAX_REPLY_SHARE`` of the prefix before it: the premium (0.75x the reply) then
  stays below the expected saving of a long pause (1.15x the prefix) whenever one request in ten
  or fewer precedes such a pause.
- ``warm_anchor``: 1h on the system prompt, 1h on the compaction summary, 1h on the *anchor* — the
  last message of the previous request (the message before the newest assistant message, i.e. the
  prefix the previous call already cached) — and the configured TTL on the newest message. New
  tokens are written once at the 5m price and the next call re-pins them at 1h. That re-pin keeps
  them alive only under the optimistic reading (a re-pinned entry becomes a 1h entry at no charge);
  under the documented one it bills a read and changes nothing, and the strategy costs more than
  ``system_and_3`` (bench/cache_economics.py). Hint
  ``after_compression=True`` (the context was just rebuilt, nothing of it is cached yet) puts the
  anchor at the configured TTL instead, so the rebuilt context is not written at the 1h price.
- ``stable_prefix``: 1h on the system prompt and on the compaction summary (both byte-stable until
  the next compression), the configured TTL on the newest messages after the summary (two with a
  summary, three without). No reliance on re-pinning: after a long pause the system prompt and
  summary are still read, the tail is rewritten.
- ``tools_and_3``: ``system_and_3`` with the first breakpoint on the last tool schema instead of the
  system prompt: the tool schemas are cached on their own, so they survive a change of the system
  prompt (the note the first compression appends, a per-user instruction); without tools the
  system prompt gets it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from compression.core.cache_markers import (
    CachedRequest,
    Messages,
    Tools,
    can_carry_marker,
    place_marker,
    system_and_3,
)
from compression.core.markers import SUMMARY_KEY
from compression.core.tokens import estimate_tokens_rough, message_tokens, tools_text

H1 = {"type": "ephemeral", "ttl": "1h"}
ROLLING_MAX_REPLY_SHARE = 0.1


def _carrier_indexes(messages: list[dict[str, Any]], native_anthropic: bool) -> list[int]:
    can = can_carry_marker
    return [i for i, m in enumerate(messages) if m.get("role") != "system" and can(m, native_anthropic)]


def _system_index(messages: list[dict[str, Any]], native_anthropic: bool) -> int | None:
    if messages and messages[0].get("role") == "system" and can_carry_marker(messages[0], native_anthropic):
        return 0
    return None


def summary_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """The message that carries the compaction summary (``_compressed_summary``), if any."""
    for i, m in enumerate(messages):
        if m.get(SUMMARY_KEY):
            return i
    return None


def previous_request_end(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the last message of the request that produced the newest assistant message (the
    message right before it), or None without an assistant message after the system prompt."""
    for i in range(len(messages) - 1, 0, -1):
        if messages[i].get("role") == "assistant":
            return i - 1 if messages[i - 1].get("role") != "system" else None
    return None


def _last_carrier_at_or_before(carriers: list[int], index: int | None) -> int | None:
    if index is None:
        return None
    found = [c for c in carriers if c <= index]
    return found[-1] if found else None


def _result(messages: Messages, tools: Tools, used: int, name: str) -> CachedRequest:
    return CachedRequest(messages, copy.deepcopy(tools) if tools is not None else None, used, name)


def _place(messages: Messages, index: int, marker: Mapping[str, str], native_anthropic: bool) -> None:
    place_marker(messages[index], marker, native_anthropic)


def warm_anchor(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool, tools: Tools,
                hints: Mapping[str, Any] | None = None) -> CachedRequest:
    hints = hints or {}
    carriers = _carrier_indexes(messages, native_anthropic)
    plan: list[tuple[int, Mapping[str, str]]] = []  # (message index, marker), in prefix order
    sys_i = _system_index(messages, native_anthropic)
    if sys_i is not None:
        plan.append((sys_i, H1))
    last = carriers[-1] if carriers else None
    summ = _last_carrier_at_or_before(carriers, summary_index(messages))
    anchor = _last_carrier_at_or_before(carriers, previous_request_end(messages))
    if anchor is not None and anchor == last:
        anchor = None
    if summ is not None and (summ == last or (anchor is not None and summ >= anchor)):
        summ = None  # the anchor (or the newest marker) already covers the summary
    if summ is not None:
        plan.append((summ, H1))
    if anchor is not None:
        cold = bool(hints.get("after_compression"))
        plan.append((anchor, dict(marker) if cold else H1))
    if last is not None:
        plan.append((last, dict(marker)))
    plan = _enforce_ttl_order(plan)
    for index, mk in plan:
        _place(messages, index, mk, native_anthropic)
    return _result(messages, tools, len(plan), "warm_anchor")


def _enforce_ttl_order(plan: list[tuple[int, Mapping[str, str]]]) -> list[tuple[int, Mapping[str, str]]]:
    """Downgrade any 1h marker that would follow a 5m one (never happens with the plans above)."""
    out, seen_5m = [], False
    for index, mk in plan:
        is_1h = mk.get("ttl") == "1h"
        if is_1h and seen_5m:
            mk = {"type": "ephemeral"}
            is_1h = False
        seen_5m = seen_5m or not is_1h
        out.append((index, mk))
    return out


def newest_reply(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the newest assistant message when a message follows it (None otherwise)."""
    for i in range(len(messages) - 1, 0, -1):
        if messages[i].get("role") == "assistant":
            return i if i < len(messages) - 1 else None
    return None


def _prefix_tokens(messages: Sequence[Mapping[str, Any]], tools: Tools) -> int:
    return sum(message_tokens(m) for m in messages) + estimate_tokens_rough(tools_text(tools))


def rolling_reply(messages: Sequence[Mapping[str, Any]], carriers: list[int], tools: Tools,
                  hints: Mapping[str, Any]) -> int | None:
    """The message ``rolling_1h`` marks 1h, or None when the request gets ``system_and_3``'s layout."""
    if hints.get("after_compression") or not messages:
        return None  # sent cold: the rebuilt context is not cached yet
    opens_turn = messages[-1].get("role") == "user"
    if messages[-1].get("role") != "tool" and not (opens_turn and hints.get("warm")):
        return None  # right after a pause that may have outlived the cache
    reply = newest_reply(messages)
    if reply is None or reply not in carriers or reply == carriers[-1]:
        return None
    if message_tokens(messages[reply]) > ROLLING_MAX_REPLY_SHARE * _prefix_tokens(messages[:reply], tools):
        return None  # a long reply costs more at 1h than a long pause would be expected to save
    return reply


def rolling_1h(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool, tools: Tools,
               hints: Mapping[str, Any] | None = None) -> CachedRequest:
    carriers = _carrier_indexes(messages, native_anthropic)
    reply = rolling_reply(messages, carriers, tools, hints or {})
    if reply is None:
        return replace(system_and_3(messages, marker=marker, native_anthropic=native_anthropic,
                                                tools=tools), strategy="rolling_1h")
    plan: list[tuple[int, Mapping[str, str]]] = []
    sys_i = _system_index(messages, native_anthropic)
    if sys_i is not None:
        plan.append((sys_i, H1))
    plan.append((reply, H1))
    after = [c for c in carriers if c > reply]
    plan.extend((c, dict(marker)) for c in after[-(4 - len(plan)):])
    plan = _enforce_ttl_order(plan)
    for index, mk in plan:
        _place(messages, index, mk, native_anthropic)
    return _result(messages, tools, len(plan), "rolling_1h")


def stable_prefix(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool, tools: Tools) -> CachedRequest:
    carriers = _carrier_indexes(messages, native_anthropic)
    plan: list[tuple[int, Mapping[str, str]]] = []
    sys_i = _system_index(messages, native_anthropic)
    if sys_i is not None:
        plan.append((sys_i, H1))
    summ = _last_carrier_at_or_before(carriers, summary_index(messages))
    if summ is not None and summ == (carriers[-1] if carriers else None):
        summ = None  # the summary is (merged into) the newest message: it is the tail
    if summ is not None:
        plan.append((summ, H1))
    room = 4 - len(plan)
    tail = [c for c in carriers if summ is None or c > summ][-room:]
    plan.extend((c, dict(marker)) for c in tail)
    plan = _enforce_ttl_order(plan)
    for index, mk in plan:
        _place(messages, index, mk, native_anthropic)
    return _result(messages, tools, len(plan), "stable_prefix")


def tools_and_3(messages: Messages, *, marker: Mapping[str, str], native_anthropic: bool, tools: Tools) -> CachedRequest:
    tools = copy.deepcopy(tools) if tools is not None else None
    used = 0
    if tools:
        tools[-1]["cache_control"] = dict(marker)
        used = 1
    elif _system_index(messages, native_anthropic) is not None:
        _place(messages, 0, marker, native_anthropic)
        used = 1
    carriers = _carrier_indexes(messages, native_anthropic)
    for c in carriers[max(0, len(carriers) - (4 - used)):]:
        _place(messages, c, marker, native_anthropic)
        used += 1
    return CachedRequest(messages, tools, used, "tools_and_3")


EXTRA_STRATEGIES = {
    "rolling_1h": rolling_1h,
    "warm_anchor": warm_anchor,
    "stable_prefix": stable_prefix,
    "tools_and_3": tools_and_3,
}
