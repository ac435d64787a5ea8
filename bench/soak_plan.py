"""The tools profile's plan (bench/soak.py --profile tools): who the users are, which two are over
their limits, which conversations each owns, and the turns every conversation cycles through.

Pure: no Django, no clock, no network; the same arguments give the same plan.

Each conversation repeats one cycle of turns, phrased as the simulator's triggers
(docs/simulator.md) so the model calls tools:

- ``read``: "read notes.txt", a long workspace file (about 18,000 characters of notes);
- ``chat``: a plain reply, with a fact (a time, a build, a key) the anchor index keeps;
- ``search_files``: "search for TODO" across the workspace;
- ``mcp_big``: the MCP server's ``big`` tool, a 16,000-character result;
- ``write``: "write … to status-N.txt" (ten files, rewritten in turn);
- ``mcp_echo``: the MCP server's ``echo`` tool;
- ``list``: "list files";
- ``recall_search``: "search the history for …", which makes the agent call ``context_search``
  (offered by the lcm engine);
- ``recall_expand``: ``context_expand`` on the reference the last search reported; skipped while
  no search has found anything (before the conversation's first compaction).

The long results (notes, the MCP ``big`` result) grow a conversation on the 64K simulator model by
about 13,000 tokens a cycle, so it compacts every three or four cycles.
"""
from __future__ import annotations

import json

MODEL = "sim-claude-64k"
ENGINE = "lcm"
USERS = 4
# The two users over their limits: a few messages a minute where a driver sends one every few
# seconds, so most of their sends are refused and some get through as the minute rolls on.
LIMITED = {2: {"messages_per_minute": 2}, 3: {"messages_per_minute": 3}}
MCP_SERVER = "probe"
MCP_INCLUDE = ("echo", "big")
NOTES_FILE = "notes.txt"
BIG_RESULT_CHARS = 16_000
STATUS_FILES = 10
WORDS = 40
STEPS = ("read", "chat", "search_files", "mcp_big", "write", "mcp_echo", "list", "recall_search", "recall_expand")
# What a refused send's 422 says (sessions/services/limits.py): "…, your limit of 2 a minute; you
# can send again at 14:03:27 UTC."
REFUSAL_WORDS = ("limit of", "you can send again")


def user_name(u: int) -> str:
    return f"soak{u}"


def seed_plan(conversations: int, users: int = USERS) -> dict:
    """What bench/soak_seed.py creates: users (with their limits), conversations (owner by index,
    round robin), the model and the context engine."""
    return {
        "model": MODEL,
        "engine": ENGINE,
        "users": [{"name": user_name(u), "limits": dict(LIMITED.get(u, {}))} for u in range(users)],
        "conversations": [{"index": i, "user": i % users} for i in range(conversations)],
    }


def plan_per_user(conversations: int, users: int = USERS) -> dict[str, dict]:
    """Per user: their conversations (by index), their limits, and the turns one cycle of each
    conversation asks for."""
    plan = seed_plan(conversations, users)
    out: dict[str, dict] = {}
    for u, spec in enumerate(plan["users"]):
        owned = [c["index"] for c in plan["conversations"] if c["user"] == u]
        out[spec["name"]] = {"conversations": owned, "limits": spec["limits"],
                             "turns_per_cycle": {step: len(owned) for step in STEPS}}
    return out


def turn_text(step: str, *, conversation: int, cycle: int, ref: str | None = None, words: int = WORDS) -> str | None:
    """The message of one step; None when the step has nothing to do (an expand without a
    reference)."""
    i, n = conversation, cycle
    if step == "read":
        return f"read {NOTES_FILE}"
    if step == "chat":
        return (f"reply with {words} words about the release plan. Note for conversation {i}: the nightly "
                f"export of cycle {n} finished at {n % 24:02d}:{(7 * n) % 60:02d} UTC with build {i}-{n}.")
    if step == "search_files":
        return "search for TODO"
    if step == "mcp_big":
        return f"call tool mcp_{MCP_SERVER}_big with " + json.dumps({"size": BIG_RESULT_CHARS})
    if step == "write":
        return f'write "status of conversation {i}, cycle {n}: export checked" to status-{n % STATUS_FILES}.txt'
    if step == "mcp_echo":
        return f"call tool mcp_{MCP_SERVER}_echo with " + json.dumps({"text": f"conversation {i} cycle {n}"})
    if step == "list":
        return "list files"
    if step == "recall_search":
        return f"search the history for the nightly export of conversation {i}"
    if step == "recall_expand":
        if not ref:
            return None
        return "call tool context_expand with " + json.dumps({"ref": ref, "before": 1, "after": 1})
    raise ValueError(f"unknown step {step!r}")


def is_refusal(status: int, body: str) -> bool:
    """A send refused by a per-user limit (expected in this profile), not a failure."""
    return status == 422 and all(words in body for words in REFUSAL_WORDS)


def notes_text(conversation: int, chars: int = 18_000) -> str:
    """The workspace's notes file: numbered lines of project notes, every fifth a TODO."""
    lines, n = [], 0
    while sum(len(line) + 1 for line in lines) < chars:
        n += 1
        kind = "TODO" if n % 5 == 0 else "note"
        lines.append(f"{kind} {n}: conversation {conversation} keeps the export job's settings in config/export.yaml; "
                     f"retry {n % 7} times, then page the on-call engineer (runbook section {n % 13}).")
    return "\n".join(lines)[:chars] + "\n"
