"""Phase 1 of compression (SPEC §6): shrink old tool output without a model call.

Guarantees:
- Never mutates its input. Unchanged messages are returned as the same objects (so cached token
  counts stay valid); every changed message is a new dict without a stale ``_tokens`` count.
- Deduplication covers the whole list, tail included: of identical tool results of ≥ 200 chars only
  the newest keeps its content.
- Outside the protected tail: tool results over 200 chars become one informative line, image parts
  in tool results become ``[screenshot removed to save context]`` (the base64 is dropped), and
  tool-call arguments over 500 chars have every string leaf over 200 chars cut, re-serialised so the
  JSON stays valid. Arguments that are not valid JSON are left exactly as they were.
- ``summarize_tool_result`` never raises.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .tokens import MESSAGE_OVERHEAD_TOKENS, TOKENS_KEY, content_text, is_image_part, message_tokens

PRUNE_MIN_CHARS = 200  # tool results longer than this are summarised; dedupe needs at least this many
ARGS_MAX_CHARS = 500
ARG_LEAF_MAX_CHARS = 200
TRUNCATED_SUFFIX = "...[truncated]"
DUPLICATE_PLACEHOLDER = "[Duplicate tool output — same content as a more recent call]"
SCREENSHOT_PLACEHOLDER = "[screenshot removed to save context]"
LEGACY_PLACEHOLDER = "[Old tool output cleared to save context space]"

TokenCounter = Callable[[Mapping[str, Any]], int]

_EXIT_CODE = re.compile(r"""(?i)["']?exit[_ ]?code["']?\s*[:=]?\s*(-?\d+)""")


def default_walk_tokens(msg: Mapping[str, Any]) -> int:
    """A message's size in every walk: its stored/computed token count plus role-and-keys overhead."""
    return message_tokens(msg) + MESSAGE_OVERHEAD_TOKENS


def _changed(msg: Mapping[str, Any], **updates: Any) -> dict[str, Any]:
    """A copy of ``msg`` with ``updates`` applied and its (now stale) token count dropped."""
    out = {k: v for k, v in msg.items() if k != TOKENS_KEY}
    out.update(updates)
    return out


def _parse_args(args: Any) -> dict[str, Any]:
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str) and args.strip():
        try:
            parsed = json.loads(args)
        except (ValueError, TypeError):
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _one_line(value: Any, limit: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _line_count(content: str) -> int:
    return len(content.splitlines()) if content.strip() else 0


def _json_or_none(content: str) -> Any:
    stripped = content.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _count_items(content: str, count_keys: tuple[str, ...], list_keys: tuple[str, ...]) -> int:
    """How many entries/matches a tool reported: a JSON count or list if present, else non-empty lines."""
    data = _json_or_none(content)
    if isinstance(data, list):
        return len(data)
    if isinstance(data, dict):
        for key in count_keys:
            count = data.get(key)
            if isinstance(count, int) and not isinstance(count, bool):
                return count
        for key in list_keys:
            if isinstance(data.get(key), list):
                return len(data[key])
    return sum(1 for line in content.splitlines() if line.strip())


def _summarize(tool: str, args: dict[str, Any], content: str) -> str:
    n = f"{len(content):,}"
    if tool == "terminal":
        cmd = _one_line(args.get("command", args.get("cmd", "")), 80)
        match = _EXIT_CODE.search(content)
        code = match.group(1) if match else "?"
        return f"[terminal] ran `{cmd}` -> exit {code}, {_line_count(content)} lines output"
    if tool == "read_file":
        path = args.get("path") or args.get("file_path") or "?"
        offset = args.get("offset") or 1
        return f"[read_file] read {path} from line {offset} ({n} chars)"
    if tool == "write_file":
        path = args.get("path") or args.get("file_path") or "?"
        body = args.get("content")
        lines = _line_count(body) if isinstance(body, str) else "?"
        return f"[write_file] wrote to {path} ({lines} lines)"
    if tool == "list_files":
        path = args.get("path") or "."
        entries = _count_items(content, ("total_count", "count"), ("entries", "files", "items"))
        return f"[list_files] listed {path} -> {entries} entries"
    if tool == "search_files":
        target = args.get("target") or "content"
        pattern = _one_line(args.get("pattern", args.get("query", "")), 60)
        path = args.get("path") or "."
        matches = _count_items(content, ("total_count", "count"), ("matches", "results"))
        return f"[search_files] {target} search for '{pattern}' in {path} -> {matches} matches"
    parts = [f"{k}={_one_line(v, 40)}" for k, v in list(args.items())[:2]]
    shown = (" " + " ".join(parts)) if parts else ""
    return f"[{tool}]{shown} ({n} chars result)"


def summarize_tool_result(tool: str | None, args: Any, content: Any) -> str:
    """One informative line describing a tool result, e.g. ``[terminal] ran `npm test` -> exit 0, 47 lines output``.

    ``args`` may be the JSON arguments string or a dict; unparseable arguments count as ``{}``.
    """
    tool = tool or "tool"
    text = content if isinstance(content, str) else content_text(content)
    try:
        return _summarize(tool, _parse_args(args), text)
    except Exception:  # a summary line must never break compression
        return f"[{tool}] ({len(text):,} chars result)"


def _truncate_leaves(value: Any) -> Any:
    if isinstance(value, str):
        return value[:ARG_LEAF_MAX_CHARS] + TRUNCATED_SUFFIX if len(value) > ARG_LEAF_MAX_CHARS else value
    if isinstance(value, list):
        return [_truncate_leaves(v) for v in value]
    if isinstance(value, dict):
        return {k: _truncate_leaves(v) for k, v in value.items()}
    return value


def truncate_tool_arguments(arguments: Any) -> Any:
    """Arguments over 500 chars with long string leaves cut; still valid JSON; invalid JSON unchanged."""
    if not isinstance(arguments, str) or len(arguments) <= ARGS_MAX_CHARS:
        return arguments
    try:
        parsed = json.loads(arguments)
    except (ValueError, TypeError):
        return arguments  # slicing raw JSON caused permanent 400 loops upstream (#11762)
    shrunk = json.dumps(_truncate_leaves(parsed), ensure_ascii=False)
    return shrunk if len(shrunk) < len(arguments) else arguments


def prune_boundary(
    messages: Sequence[Mapping[str, Any]],
    protect_tail_count: int,
    protect_tail_tokens: int | None,
    token_counter: TokenCounter = default_walk_tokens,
) -> int:
    """Index where the protected tail starts: a token walk from the end, ``protect_tail_count`` a floor."""
    n = len(messages)
    count_floor = max(0, min(protect_tail_count, n))
    if not protect_tail_tokens or protect_tail_tokens <= 0:
        return n - count_floor
    acc = 0
    counted = 0
    for i in range(n - 1, -1, -1):
        tokens = token_counter(messages[i])
        if acc + tokens > protect_tail_tokens and counted >= count_floor:
            break
        acc += tokens
        counted += 1
    return n - max(counted, count_floor)


def _call_index(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, Any]]:
    index: dict[str, tuple[str, Any]] = {}
    for msg in messages:
        if msg.get("role") != "assistant":
            continue
        for call in msg.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            fn = call.get("function") or {}
            call_id = call.get("id") or call.get("call_id")
            if call_id:
                index[str(call_id)] = (str(fn.get("name") or ""), fn.get("arguments"))
    return index


def _is_placeholder(text: str) -> bool:
    return text == LEGACY_PLACEHOLDER or text.startswith("[Duplicate tool output")


def _prune_tool_message(msg: Mapping[str, Any], tool: str, args: Any) -> dict[str, Any] | None:
    """The pruned copy of one old tool message, or None when it is already small."""
    content = msg.get("content")
    if isinstance(content, str):
        if len(content) <= PRUNE_MIN_CHARS or _is_placeholder(content):
            return None
        return _changed(msg, content=summarize_tool_result(tool, args, content))
    if isinstance(content, list):
        images = sum(1 for p in content if is_image_part(p))
        text = content_text(content)
        if len(text) > PRUNE_MIN_CHARS and not _is_placeholder(text):
            line = summarize_tool_result(tool, args, text)
            if images:
                line += f" {SCREENSHOT_PLACEHOLDER}"
            return _changed(msg, content=line)
        if images:
            parts = [{"type": "text", "text": SCREENSHOT_PLACEHOLDER} if is_image_part(p) else p for p in content]
            return _changed(msg, content=parts)
    return None


def _truncate_calls(msg: Mapping[str, Any]) -> dict[str, Any] | None:
    calls = msg.get("tool_calls")
    if not calls:
        return None
    new_calls = []
    changed = False
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            shrunk = truncate_tool_arguments(fn.get("arguments"))
            if shrunk is not fn.get("arguments"):
                call = {**call, "function": {**fn, "arguments": shrunk}}
                changed = True
        new_calls.append(call)
    return _changed(msg, tool_calls=new_calls) if changed else None


def prune_old_tool_results(
    messages: Sequence[Mapping[str, Any]],
    protect_tail_count: int,
    protect_tail_tokens: int | None,
    *,
    token_counter: TokenCounter = default_walk_tokens,
) -> tuple[list[dict[str, Any]], int]:
    """Dedupe identical tool results everywhere, then shrink old tool output outside the protected tail.

    Returns ``(messages, pruned_count)``; ``pruned_count`` counts tool messages whose content changed
    (argument truncation is not counted).
    """
    out: list[Any] = list(messages)
    pruned = 0

    # Newest first so the most recent full copy is the one that survives.
    seen: set[str] = set()
    for i in range(len(out) - 1, -1, -1):
        msg = out[i]
        content = msg.get("content")
        if msg.get("role") != "tool" or not isinstance(content, str) or len(content) < PRUNE_MIN_CHARS:
            continue
        digest = hashlib.md5(content.encode("utf-8", "surrogatepass")).hexdigest()
        if digest in seen:
            out[i] = _changed(msg, content=DUPLICATE_PLACEHOLDER)
            pruned += 1
        else:
            seen.add(digest)

    boundary = prune_boundary(out, protect_tail_count, protect_tail_tokens, token_counter)
    if boundary <= 0:
        return out, pruned
    calls = _call_index(out[:boundary])
    for i in range(boundary):
        msg = out[i]
        role = msg.get("role")
        if role == "tool":
            tool, args = calls.get(str(msg.get("tool_call_id")), (str(msg.get("name") or "tool"), None))
            replacement = _prune_tool_message(msg, tool or str(msg.get("name") or "tool"), args)
            if replacement is not None:
                out[i] = replacement
                pruned += 1
        elif role == "assistant":
            replacement = _truncate_calls(msg)
            if replacement is not None:
                out[i] = replacement
    return out, pruned
