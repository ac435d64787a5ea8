"""Import a conversation: a ``hermes-web/1`` export (``conversation_export``) or an OpenAI-style
``messages`` array (a bare JSON list of ``{role, content, tool_calls?, tool_call_id?, name?}``, or
``{"messages": [...]}``), as a new conversation of ``owner``.

Guarantees of ``import_document``:
- the whole document is read and checked before anything is written
  (``conversation_import_validate``); a refusal is an ``ImportRefused`` naming the bad field's path
  (``messages[3].role: must be one of system, user, assistant, tool``), and nothing is written;
- all or nothing: the rows are written in one transaction and the files inside it, after the rows;
  when anything fails the transaction rolls back and the files written are removed;
- the import is a new conversation of ``owner`` alone, with new ids throughout; the exported
  conversation, wherever it lives, is never read or touched;
- token counts are recomputed as ``message_append`` counts them; the search index and the word
  list are filled by the database's own triggers as the rows are inserted (migrations 0005, 0011);
- it continues like any other conversation: the sessions keep their chain, ``seq`` order and
  compaction state; every sent user message gets a finished ``Turn`` (as the agent loop leaves
  one), attachments are linked to their message and turn; the model is the exported one when it
  can run here, else the installation's default (said in ``import_notes``).

``MAX_IMPORT_BYTES`` (128 MiB) bounds the document: the export's file caps (64 MiB of files,
about 85 MiB in base64) leave room for the messages.
"""
from __future__ import annotations

import copy
import json
from typing import IO

from django.db import transaction
from django.utils import timezone

from compression.core.tokens import compute_message_tokens
from sessions.models import CompressionEvent, Conversation, Message, Session, Turn
from sessions.services import runtime
from sessions.services.conversation_export import FORMAT
from sessions.services.conversation_import_checks import ImportRefused
from sessions.services.conversation_import_files import attachment_stored, files_remove, workspace_write
from sessions.services.conversation_import_validate import MessagePlan, Plan, native_plan, openai_plan
from sessions.services.routes import RouteUnavailable, route_resolve, window_override

__all__ = ["FORMAT", "MAX_IMPORT_BYTES", "ImportRefused", "import_document"]

MAX_IMPORT_BYTES = 128 * 1024 * 1024
WRITE_BATCH = 500
DOCUMENT = "document"


def document_read(source: bytes | str | IO) -> bytes:
    """The document's bytes: ``source`` itself (bytes, or the JSON text as a string) or what a
    file object holds; refused beyond ``MAX_IMPORT_BYTES``."""
    if isinstance(source, str):
        data = source.encode("utf-8", "surrogatepass")
    elif isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        data = source.read(MAX_IMPORT_BYTES + 1)
        data = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if len(data) > MAX_IMPORT_BYTES:
        raise ImportRefused(DOCUMENT, f"larger than the import's limit of {MAX_IMPORT_BYTES:,} bytes")
    return data


def document_parse(data: bytes):
    """The JSON value of the document; refused when it is not JSON, or ends before it is complete."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    if not data.strip():
        raise ImportRefused(DOCUMENT, "is empty")
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(data.rstrip()) or exc.msg.startswith("Unterminated string"):  # it runs to the end
            raise ImportRefused(DOCUMENT, "is cut short (truncated): the JSON ends before it is complete "
                                          f"({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
        raise ImportRefused(DOCUMENT, f"is not valid JSON: {exc.msg} at line {exc.lineno}, "
                                      f"column {exc.colno}") from None
    except UnicodeDecodeError:
        raise ImportRefused(DOCUMENT, "is not UTF-8 text") from None
    except (RecursionError, ValueError) as exc:
        raise ImportRefused(DOCUMENT, f"cannot be read as JSON ({str(exc)[:120]})") from None


def plan_of(document) -> Plan:
    """Which shape the document has, and its checked plan."""
    if isinstance(document, list):
        return openai_plan(document)
    if not isinstance(document, dict):
        raise ImportRefused(DOCUMENT, "must be a hermes-web export (an object with \"format\"), a list of messages, "
                                      "or an object with \"messages\"")
    if "format" in document:
        version = document["format"]
        if version != FORMAT:
            shown = json.dumps(version)[:60]
            known = isinstance(version, str) and version.startswith("hermes-web/")
            raise ImportRefused("format", f"unknown format version {shown} (this version reads {FORMAT})" if known
                                else f"{shown} is not a hermes-web export format (this version reads {FORMAT})")
        return native_plan(document)
    if "messages" in document:
        return openai_plan(document["messages"], title=document.get("title"))
    raise ImportRefused(DOCUMENT, "has neither \"format\" (a hermes-web export) nor \"messages\"")


def import_document(source: bytes | str | IO, *, owner) -> Conversation:
    """Import the document as a new conversation of ``owner`` (see the module docstring);
    ``ImportRefused`` with nothing written when the document is not acceptable. The conversation
    returned carries ``import_notes``: what the import changed or left out, in words."""
    plan = plan_of(document_parse(document_read(source)))
    return _write(plan, owner)


# Writing ---------------------------------------------------------------------------------------------

def _route(cfg, provider: str, model: str, notes: list[str]):
    if provider and model:
        try:
            return route_resolve(cfg, provider=provider, model=model)
        except RouteUnavailable:
            choice = route_resolve(cfg)
            notes.append(f"{model} ({provider}) cannot run here; the conversation uses {choice.model} "
                         f"({choice.provider}).")
            return choice
    return route_resolve(cfg)


def _chat(m: MessagePlan, content) -> dict:
    """The message as ``message_append`` counts it."""
    chat = {"role": m.chat["role"], "content": content}
    for name in ("tool_calls", "tool_call_id", "name"):
        if m.chat[name]:
            chat[name] = m.chat[name]
    return chat


def _content(content, attachment_ids: dict[int, int]):
    """The content with its parts' attachment ids (``_image`` / ``_document``) made the new ones."""
    if not isinstance(content, list) or not any(isinstance(p.get("_image") or p.get("_document"), dict)
                                                for p in content):
        return content
    out = []
    for part in content:
        meta_key = next((k for k in ("_image", "_document") if isinstance(part.get(k), dict)), None)
        if meta_key is not None and "attachment" in part[meta_key]:
            part = copy.copy(part)
            meta = part[meta_key] = dict(part[meta_key])
            new = attachment_ids.get(meta.pop("attachment"))
            if new is not None:
                meta["attachment"] = new
        out.append(part)
    return out


def _messages(conversation: Conversation, plan: Plan, sessions: dict[int, Session],
              attachment_ids: dict[int, int]) -> dict[int, Message]:
    now = timezone.now()
    stored: dict[int, Message] = {}
    for start in range(0, len(plan.messages), WRITE_BATCH):
        batch = []
        for m in plan.messages[start:start + WRITE_BATCH]:
            chat = _chat(m, _content(m.chat["content"], attachment_ids))
            flags = {k: v for k, v in m.flags.items() if k != "created_at"}
            batch.append(Message(conversation=conversation, session=sessions[m.session], role=chat["role"],
                                 content=chat["content"], tool_calls=m.chat["tool_calls"] or None,
                                 tool_call_id=m.chat["tool_call_id"], name=m.chat["name"],
                                 token_count=compute_message_tokens(chat),
                                 created_at=m.flags.get("created_at") or now, **flags))
        for m, row in zip(plan.messages[start:start + WRITE_BATCH], Message.objects.bulk_create(batch)):
            stored[m.key] = row
    return stored


def _turns(conversation: Conversation, messages: list[Message]) -> dict[int, Turn]:
    """A finished turn for each message the user sent (not copies, not summaries)."""
    rows = [Turn(conversation=conversation, user_message=m, kind="message", status="done", created_at=m.created_at,
                 started_at=m.created_at, finished_at=m.created_at)
            for m in messages if m.role == "user" and m.visible and not m.is_summary]
    return {t.user_message_id: t for t in Turn.objects.bulk_create(rows, batch_size=WRITE_BATCH)}


def _write(plan: Plan, owner) -> Conversation:
    cfg = runtime.current_config()
    notes = list(plan.notes)
    c = plan.conversation
    choice = _route(cfg, c["provider"], c["model"], notes)
    now = timezone.now()
    conversation = Conversation(owner=owner, title=c["title"], title_manual=c["title_manual"],
                                provider=choice.provider, model=choice.model,
                                context_length=window_override(cfg, choice),
                                max_tokens=c["max_tokens"] or cfg.model.max_tokens, mcp_off=c["mcp_off"],
                                created_at=c["created_at"] or now, last_activity_at=now)
    try:
        with transaction.atomic():
            conversation.save()
            sessions: dict[int, Session] = {}
            for s in plan.sessions:
                parent = None if s.parent is None else sessions.get(s.parent)
                sessions[s.key] = Session.objects.create(conversation=conversation, parent=parent, **s.fields)
            attachments = {p.key: (p, attachment_stored(conversation, p)) for p in plan.attachments}
            for _, row in attachments.values():
                row.save()
            messages = _messages(conversation, plan, sessions, {k: row.id for k, (_, row) in attachments.items()})
            turns = _turns(conversation, list(messages.values()))
            for p, row in attachments.values():
                row.message = messages[p.message]
                row.turn = turns.get(row.message.id)
                row.save(update_fields=["message", "turn"])
            CompressionEvent.objects.bulk_create(
                [CompressionEvent(conversation=conversation, session=sessions[e.session],
                                  new_session=None if e.new_session is None else sessions.get(e.new_session),
                                  summary_message=None if e.summary_message is None else messages.get(e.summary_message),
                                  **e.fields)
                 for e in plan.events], batch_size=WRITE_BATCH)
            workspace_write(conversation, plan.files)
    except BaseException:
        files_remove(conversation)
        raise
    conversation.import_notes = notes
    return conversation
