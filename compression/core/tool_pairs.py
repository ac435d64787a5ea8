"""Tool-pair sanitisation (SPEC §1, §6 phase 4): every call answered, every result called, in order.

Guarantees of ``sanitize_tool_pairs`` (never mutates its input; unchanged messages keep identity):
- a tool message whose call is not in an earlier assistant message is dropped;
- a call whose result is missing gets the stub result ``[Result removed during context compaction]``
  (docs/spec.md §6; Hermes Agent strips the call instead);
- the results of an assistant message's calls directly follow it, in the order of the calls, so the
  Anthropic conversion yields one ``tool_result`` user turn right after each ``tool_use`` turn;
- a second result for the same call is dropped; an empty ``tool_calls`` list is removed.
Call ids are read from ``id`` (or ``call_id``, the Responses shape, when ``id`` is missing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .tokens import TOKENS_KEY

STUB_RESULT = "[Result removed during context compaction]"


def call_id_of(call: Any) -> str | None:
    if not isinstance(call, Mapping):
        return None
    value = call.get("id") or call.get("call_id")
    return str(value) if value else None


def _call_name(call: Mapping[str, Any]) -> str:
    fn = call.get("function")
    return str(fn.get("name") or "") if isinstance(fn, Mapping) else ""


def _stub(call: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": _call_name(call), "content": STUB_RESULT}


def sanitize_tool_pairs(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages with valid tool pairs (see the module docstring)."""
    # First result for each call id, searched after the assistant message that issued the call.
    results: dict[str, list[int]] = {}
    for i, msg in enumerate(messages):
        if msg.get("role") == "tool" and msg.get("tool_call_id") is not None:
            results.setdefault(str(msg["tool_call_id"]), []).append(i)

    out: list[Any] = []
    used: set[int] = set()
    answered: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            # Results are emitted right after their call below; anything reaching here is an orphan,
            # a duplicate, or already placed.
            continue
        if role != "assistant" or "tool_calls" not in msg:
            out.append(msg)
            continue
        # Each kept call with its id, judged against the calls answered before this message.
        live = [(c, cid) for c in (msg.get("tool_calls") or ()) if (cid := call_id_of(c)) and cid not in answered]
        calls = [c for c, _ in live]
        if not calls:
            trimmed = {k: v for k, v in msg.items() if k not in ("tool_calls", TOKENS_KEY)}
            if trimmed.get("content") in (None, "", []):
                trimmed["content"] = "(tool call removed)"
            out.append(trimmed)
            continue
        if len(calls) != len(msg.get("tool_calls") or ()):
            msg = {**{k: v for k, v in msg.items() if k != TOKENS_KEY}, "tool_calls": calls}
        out.append(msg)
        for call, cid in live:
            answered.add(cid)
            found = next((j for j in results.get(cid, ()) if j > i and j not in used), None)
            if found is None:
                out.append(_stub(call, cid))
            else:
                used.add(found)
                out.append(messages[found])
    return out


def tool_pair_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """Human-readable violations of the tool-pair rules (empty when the list is valid)."""
    problems: list[str] = []
    pending: list[str] = []
    seen_calls: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg.get("role")
        if role == "tool":
            cid = str(msg.get("tool_call_id"))
            if not pending:
                problems.append(f"message {i}: tool result {cid} has no pending call")
            elif pending[0] != cid:
                problems.append(f"message {i}: tool result {cid} out of order (expected {pending[0]})")
                if cid in pending:
                    pending.remove(cid)
            else:
                pending.pop(0)
            continue
        if pending:
            problems.append(f"message {i}: calls {pending} not answered before a {role} message")
            pending = []
        if role == "assistant" and msg.get("tool_calls") is not None:
            calls = msg.get("tool_calls") or []
            if not calls:
                problems.append(f"message {i}: empty tool_calls list")
            for call in calls:
                call_cid = call_id_of(call)
                if call_cid is None:
                    problems.append(f"message {i}: tool call without an id")
                    continue
                if call_cid in seen_calls:
                    problems.append(f"message {i}: duplicate tool call id {call_cid}")
                seen_calls.add(call_cid)
                pending.append(call_cid)
    if pending:
        problems.append(f"end: calls {pending} never answered")
    return problems
