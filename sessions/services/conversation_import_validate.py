"""An import document read into a ``Plan``: everything the import will write, checked in full
before anything is written (docs/export-format.md says what is accepted).

Two shapes are read:
- a ``hermes-web/1`` export (``native_plan``): the conversation, its sessions, messages with their
  flags and order, compaction events, attachments and workspace files;
- an OpenAI-style ``messages`` array (``openai_plan``): one active session holding the messages in
  their order, all visible and live.
The sessions' real prompt sizes (measured by a provider) are not carried over: the next request
is projected from the recomputed counts, as for a session that has had no reply yet.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, overload

from compression.core.compressor_state import AWAITING_USAGE
from sessions.models import DEFAULT_TITLE, CompressionEvent
from sessions.services import titles
from sessions.services.conversation_import_checks import (
    ImportRefused,
    array,
    choice,
    flag,
    integer,
    join,
    moment,
    money,
    number,
    obj,
    text,
)
from sessions.services.conversation_import_checks import field as member
from sessions.services.conversation_import_files import (
    AttachmentPlan,
    FileBudget,
    FilePlan,
    attachments_checked,
    workspace_checked,
)
from sessions.services.conversation_import_messages import (
    ToolPairs,
    json_checked,
    message_checked,
    message_max_chars,
)

KEY_MAX = 2**63 - 1
UNFINISHED = "interrupted: the compression had not finished when the conversation was exported"
STUB_RESULT = "Not run: the imported conversation held no result of this tool call."
_EVENT_COUNTS = ("messages_before", "messages_after", "tokens_before", "tokens_after", "pruned_count",
                 "summarized_count", "messages_read", "tokens_read", "summariser_calls", "duration_ms")
_EVENT_TEXTS = {"phase": 20, "reason": 20_000, "focus_topic": 500, "aux_model": 100, "aux_failure": 20_000}


@dataclass
class SessionPlan:
    key: int
    parent: int | None
    fields: dict


@dataclass
class MessagePlan:
    key: int
    session: int
    chat: dict  # role, content, tool_calls, tool_call_id, name
    flags: dict  # seq, archived, is_summary, visible, stopped, replaced, created_at


@dataclass
class EventPlan:
    session: int
    new_session: int | None
    summary_message: int | None
    fields: dict


@dataclass
class Plan:
    conversation: dict
    sessions: list[SessionPlan]
    messages: list[MessagePlan]
    events: list[EventPlan] = field(default_factory=list)
    attachments: list[AttachmentPlan] = field(default_factory=list)
    files: list[FilePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@overload
def _key(record: dict, name: str, path: str, *, null: Literal[False] = False) -> int: ...
@overload
def _key(record: dict, name: str, path: str, *, null: bool) -> int | None: ...


def _key(record: dict, name: str, path: str, *, null: bool = False) -> int | None:
    value = record.get(name) if null else member(record, name, path)
    return integer(value, join(path, name), minimum=1, maximum=KEY_MAX, null=null)


def _conversation(raw) -> dict:
    path = "conversation"
    c = obj(raw, path)
    mcp_off = array(c.get("mcp_off") or [], join(path, "mcp_off"))
    if len(mcp_off) > 200:
        raise ImportRefused(join(path, "mcp_off"), "names more than 200 servers")
    return {
        "title": text(c.get("title") or "", join(path, "title"), max_chars=200).strip() or DEFAULT_TITLE,
        "title_manual": flag(c.get("title_manual", False), join(path, "title_manual")),
        "provider": text(c.get("provider") or "", join(path, "provider"), max_chars=40),
        "model": text(c.get("model") or "", join(path, "model"), max_chars=100),
        "max_tokens": integer(c.get("max_tokens"), join(path, "max_tokens"), minimum=1, null=True),
        "mcp_off": [text(name, join(join(path, "mcp_off"), i), max_chars=40) for i, name in enumerate(mcp_off)],
        "created_at": moment(c.get("created_at"), join(path, "created_at")),
    }


def _engine_state(record: dict, path: str) -> dict:
    state = obj(record.get("engine_state") or {}, join(path, "engine_state"))
    json_checked(state, join(path, "engine_state"), "the engine state")
    if "last_real_prompt_tokens" in state:
        state = {**state, "last_real_prompt_tokens": 0}  # a real size measured elsewhere
    return state


def _sessions(raw) -> list[SessionPlan]:
    plans: list[SessionPlan] = []
    seen: set[int] = set()
    active: str | None = None
    limit = message_max_chars()
    for i, item in enumerate(array(raw, "sessions")):
        path = join("sessions", i)
        record = obj(item, path)
        key = _key(record, "id", path)
        if key in seen:
            raise ImportRefused(join(path, "id"), f"the id {key} is used twice")
        parent = _key(record, "parent", path, null=True)
        if parent is not None and parent not in seen:
            raise ImportRefused(join(path, "parent"), f"names no session listed before this one (id {parent})")
        seen.add(key)
        ended_at = moment(record.get("ended_at"), join(path, "ended_at"))
        if ended_at is None:
            if active is not None:
                raise ImportRefused(join(path, "ended_at"), f"a second active session ({active} has no end either)")
            active = path
        last = integer(record.get("last_prompt_tokens", 0), join(path, "last_prompt_tokens"), minimum=AWAITING_USAGE)
        fields = {
            "started_at": moment(record.get("started_at"), join(path, "started_at")),
            "ended_at": ended_at,
            "end_reason": text(record.get("end_reason") or "", join(path, "end_reason"), max_chars=40),
            "system_prompt": text(record.get("system_prompt") or "", join(path, "system_prompt"), max_chars=limit),
            "compression_count": integer(record.get("compression_count", 0), join(path, "compression_count")),
            "previous_summary": text(record.get("previous_summary") or "", join(path, "previous_summary"),
                                     max_chars=limit),
            "cooldown_until": number(record.get("cooldown_until"), join(path, "cooldown_until"), null=True),
            "ineffective_count": integer(record.get("ineffective_count", 0), join(path, "ineffective_count")),
            "context_length": integer(record.get("context_length"), join(path, "context_length"), minimum=1,
                                      null=True),
            "engine_state": _engine_state(record, path),
            # AWAITING_USAGE (compressed, waiting for real usage) still holds; a real size does not.
            "last_prompt_tokens": AWAITING_USAGE if last == AWAITING_USAGE else 0,
            "counted_prompt_tokens": 0,
        }
        if fields["started_at"] is None:
            fields.pop("started_at")
        plans.append(SessionPlan(key, parent, fields))
    return plans


def _not_empty(messages: list, path: str) -> list:
    if not messages:
        raise ImportRefused(path, "holds no message: there is nothing to import")
    return messages


def _stubs(pairs: ToolPairs, session: int, key: int, seq: int, notes: list[str]) -> list[MessagePlan]:
    """Tool results for the calls left unanswered at the end of the active session."""
    stubs = []
    for call_id, name in pairs.open_calls():
        key, seq = key + 1, seq + 1
        stubs.append(MessagePlan(key, session, {"role": "tool", "content": STUB_RESULT, "tool_calls": None,
                                                "tool_call_id": call_id, "name": name}, {"seq": seq}))
    if stubs:
        notes.append(f"{len(stubs)} tool call(s) had no result; each was answered with a note that it did not run.")
    return stubs


def _messages(raw, sessions: list[SessionPlan], notes: list[str]) -> list[MessagePlan]:
    plans: list[MessagePlan] = []
    known = {s.key for s in sessions}
    last_seq: dict[int, int] = {}
    pairs: dict[int, ToolPairs] = {}
    seen: set[int] = set()
    for i, item in enumerate(_not_empty(array(raw, "messages"), "messages")):
        path = join("messages", i)
        chat = message_checked(item, path)
        key = _key(item, "id", path)
        if key in seen:
            raise ImportRefused(join(path, "id"), f"the id {key} is used twice")
        seen.add(key)
        session = _key(item, "session", path)
        if session not in known:
            raise ImportRefused(join(path, "session"), f"names no session of the document (id {session})")
        seq = integer(member(item, "seq", path), join(path, "seq"))
        if seq <= last_seq.get(session, -1):
            raise ImportRefused(join(path, "seq"), f"must be larger than the seq of the session's previous message "
                                                   f"({last_seq[session]})")
        last_seq[session] = seq
        flags = {"seq": seq, "created_at": moment(item.get("created_at"), join(path, "created_at"))}
        for name, default in (("archived", False), ("is_summary", False), ("visible", True), ("stopped", False),
                              ("replaced", False)):
            flags[name] = flag(item.get(name, default), join(path, name))
        pairs.setdefault(session, ToolPairs()).add(chat, path, live=not flags["archived"])
        plans.append(MessagePlan(key, session, chat, flags))
    active = next((s.key for s in sessions if s.fields["ended_at"] is None), None)
    if active is not None and active in pairs:
        plans += _stubs(pairs[active], active, max(seen), last_seq[active], notes)
    return plans


def _event(record: dict, path: str, sessions: set[int], messages: set[int]) -> EventPlan:
    session = _key(record, "session", path)
    new_session = _key(record, "new_session", path, null=True)
    summary = _key(record, "summary_message", path, null=True)
    for name, value, known in (("session", session, sessions), ("new_session", new_session, sessions),
                               ("summary_message", summary, messages)):
        if value is not None and value not in known:
            raise ImportRefused(join(path, name), f"names nothing of the document (id {value})")
    status = choice(member(record, "status", path), join(path, "status"), [s for s, _ in CompressionEvent.STATUS])
    fields = {"trigger": choice(member(record, "trigger", path), join(path, "trigger"),
                                [t for t, _ in CompressionEvent.TRIGGERS]),
              "status": status, "in_place": flag(record.get("in_place", False), join(path, "in_place")),
              "summary": text(record.get("summary") or "", join(path, "summary"), max_chars=message_max_chars()),
              "cost": money(record.get("cost", 0), join(path, "cost")),
              "started_at": moment(record.get("started_at"), join(path, "started_at")),
              "finished_at": moment(record.get("finished_at"), join(path, "finished_at"))}
    for name in _EVENT_COUNTS:
        fields[name] = integer(record.get(name, 0), join(path, name))
    for name, limit in _EVENT_TEXTS.items():
        fields[name] = text(record.get(name) or "", join(path, name), max_chars=limit)
    if fields["started_at"] is None:
        fields.pop("started_at")
    if status in ("queued", "running"):  # nothing will ever finish it here
        fields.update(status="failed", phase="done", reason=UNFINISHED)
    return EventPlan(session, new_session, summary, fields)


def native_plan(document: dict) -> Plan:
    """The plan of a ``hermes-web/1`` export (its ``format`` already checked)."""
    notes: list[str] = []
    if "settings" in document:
        obj(document["settings"], "settings")  # informative: the installation's own settings apply
    conversation = _conversation(member(document, "conversation", ""))
    sessions = _sessions(member(document, "sessions", ""))
    messages = _messages(member(document, "messages", ""), sessions, notes)
    session_keys, message_keys = {s.key for s in sessions}, {m.key for m in messages}
    events = [_event(obj(item, join("compaction_events", i)), join("compaction_events", i), session_keys, message_keys)
              for i, item in enumerate(array(document.get("compaction_events") or [], "compaction_events"))]
    budget = FileBudget()
    user_messages = {m.key for m in messages if m.chat["role"] == "user"}
    attachments = attachments_checked(document.get("attachments") or [], user_messages=user_messages, budget=budget)
    files = workspace_checked(document.get("workspace") or {}, budget=budget)
    if budget.skipped:
        notes.append(f"{budget.skipped} file(s) were listed without their bytes (over the export's caps) and are not "
                     "restored.")
    return Plan(conversation, sessions, messages, events, attachments, files, notes)


def _first_text(messages: list[MessagePlan]) -> str:
    for m in messages:
        if m.chat["role"] != "user":
            continue
        content = m.chat["content"]
        if isinstance(content, list):
            content = next((p.get("text") for p in content if p.get("type") == "text"), "")
        return content or ""
    return ""


def openai_plan(raw, *, title=None) -> Plan:
    """The plan of an OpenAI-style messages array: one active session, in order."""
    notes: list[str] = []
    pairs = ToolPairs()
    messages: list[MessagePlan] = []
    for i, item in enumerate(_not_empty(array(raw, "messages"), "messages")):
        path = join("messages", i)
        chat = message_checked(item, path)
        pairs.add(chat, path, live=True)
        messages.append(MessagePlan(i + 1, 1, chat, {"seq": i}))
    messages += _stubs(pairs, 1, len(messages), len(messages) - 1, notes)
    title = text(title, "title", max_chars=200).strip() if title is not None else ""
    conversation: dict[str, object] = {
        "title": title or titles.title_from_message(_first_text(messages)), "title_manual": False,
        "provider": "", "model": "", "max_tokens": None, "mcp_off": [], "created_at": None}
    session = SessionPlan(1, None, {"ended_at": None})
    return Plan(conversation, [session], messages, notes=notes)
