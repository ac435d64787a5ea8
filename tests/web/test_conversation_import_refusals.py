"""Imports that must be refused (docs/export-format.md): each refusal names the path of the bad
field and writes nothing — no conversation, session, message, turn, attachment or event row, and
no file — and a failure while writing takes back the rows and the files written before it."""
from __future__ import annotations

import base64
import copy
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from sessions.models import Attachment, CompressionEvent, Conversation, Message, Session, Turn
from sessions.services import attachments as attachment_service
from sessions.services import conversation_import
from sessions.services.context import message_append, session_start
from sessions.services.conversation_export import iter_json
from sessions.services.conversation_import import ImportRefused, import_document
from sessions.services.turns import turn_submit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


@pytest.fixture
def document(alice) -> dict:
    """An export: a user message, a tool call and its result, a reply, and a workspace file."""
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=conversation)
    message_append(session=session, role="user", content="List the files, please.")
    message_append(session=session, role="assistant", content=None, tool_calls=[
        {"id": "call_7", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}])
    message_append(session=session, role="tool", content="notes.txt", tool_call_id="call_7", name="list_files")
    message_append(session=session, role="assistant", content="There is notes.txt.")
    conversation.workspace.mkdir(parents=True)
    (conversation.workspace / "notes.txt").write_text("the launch code is 4417\n")
    return json.loads("".join(iter_json(conversation)))


def state(settings) -> tuple:
    rows = tuple(m.objects.count() for m in (Conversation, Session, Message, Turn, Attachment, CompressionEvent))
    files = sorted(str(p) for root in (settings.HERMES_ATTACHMENTS_DIR, settings.HERMES_WORKSPACES_DIR)
                   if Path(root).exists() for p in Path(root).rglob("*"))
    return rows, files


def refused(source, owner, settings) -> ImportRefused:
    """The refusal of ``source`` (a document, or its text), with nothing written."""
    before = state(settings)
    if not isinstance(source, str | bytes):
        source = json.dumps(source)
    with pytest.raises(ImportRefused) as info:
        import_document(source, owner=owner)
    assert state(settings) == before
    assert str(info.value) == f"{info.value.path}: {info.value.reason}"
    return info.value


def test_a_truncated_document_is_refused(bob, document, settings):
    text = json.dumps(document)
    error = refused(text[: len(text) // 2], bob, settings)
    assert error.path == "document" and "cut short" in error.reason


def test_an_unknown_format_version_is_refused(bob, document, settings):
    document["format"] = "hermes-web/2"
    error = refused(document, bob, settings)
    assert str(error) == 'format: unknown format version "hermes-web/2" (this version reads hermes-web/1)'
    document["format"] = "chatgpt"
    assert refused(document, bob, settings).path == "format"


def test_a_wrong_role_is_refused_with_its_path(bob, document, settings):
    document["messages"][1]["role"] = "robot"
    assert str(refused(document, bob, settings)) == "messages[1].role: must be one of system, user, assistant, tool"
    array = [{"role": "user", "content": "hi"}, {"role": "bot", "content": "hello"}]
    assert str(refused(array, bob, settings)) == "messages[1].role: must be one of system, user, assistant, tool"


def test_a_tool_result_without_its_call_is_refused(bob, document, settings):
    array = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "42"}]
    error = refused(array, bob, settings)
    assert error.path == "messages[1].tool_call_id" and "no earlier assistant message made" in error.reason
    document["messages"][2]["tool_call_id"] = "call_nope"
    assert refused(document, bob, settings).path == "messages[2].tool_call_id"
    # A call answered later than the next message is no valid history either.
    late = [{"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "well?"}, {"role": "tool", "tool_call_id": "c1", "content": "x"}]
    error = refused(late, bob, settings)
    assert error.path == "messages[1].tool_calls[0].id" and "before the next message" in error.reason


def test_fifty_megabytes_of_text_in_one_message_is_refused(bob, settings):
    error = refused(json.dumps([{"role": "user", "content": "x" * 50_000_000}]), bob, settings)
    assert error.path == "messages[0].content" and "too long" in error.reason and "1,000,000" in error.reason


def test_a_document_over_the_import_limit_is_refused_before_it_is_read_whole(bob, document, settings, monkeypatch):
    monkeypatch.setattr(conversation_import, "MAX_IMPORT_BYTES", 1_000)
    source = io.BytesIO(json.dumps(document).encode())
    before = state(settings)
    with pytest.raises(ImportRefused, match="document: larger than the import's limit of 1,000 bytes"):
        import_document(source, owner=bob)
    assert source.tell() == 1_001 and state(settings) == before


def _mutate(document: dict, path: str, value) -> None:
    """Set ``path`` (``messages.1.tool_calls``) of ``document`` to ``value`` (None as ``...``: delete)."""
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target = document
    for part in parents:
        target = target[part]
    if value is ...:
        del target[last]
    else:
        target[last] = value


CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("messages", {}, "messages: must be a list, not an object"),
    ("messages", [], "messages: holds no message: there is nothing to import"),
    ("messages.0", "hello", "messages[0]: must be an object, not a string"),
    ("messages.0.role", ..., "messages[0].role: is missing"),
    ("messages.0.session", 999, "messages[0].session: names no session of the document (id 999)"),
    ("messages.1.seq", 0, "messages[1].seq: must be larger than the seq of the session's previous message (0)"),
    ("messages.1.id", "m2", "messages[1].id: must be a whole number, not a string"),
    ("messages.0.archived", "yes", "messages[0].archived: must be true or false, not a string"),
    ("messages.0.content", 42, "messages[0].content: must be a string, a list of blocks or null, not a number"),
    ("messages.0.content", [{"type": "video", "url": "x"}],
     "messages[0].content[0].type: must be one of text, image_url, input_image, image, document, thinking, "
     "redacted_thinking, search_result"),
    ("messages.0.content", [{"type": "text"}], "messages[0].content[0].text: is missing"),
    ("messages.0.content", [{"type": "image_url", "image_url": {"url": "data:image/png;base64,**"}}],
     "messages[0].content[0].image_url.url: is not a valid base64 data URL"),
    ("messages.0.content", "a\x00b",
     "messages[0].content: holds a NUL character at position 1, which cannot be stored"),
    ("messages.0.tool_calls", [CALL], "messages[0].tool_calls: only an assistant message makes tool calls (this is a "
                                      "user message)"),
    ("messages.1.tool_calls.0.function.arguments", {"a": 1},
     "messages[1].tool_calls[0].function.arguments: must be a string (the arguments as JSON text), not an object"),
    ("messages.1.tool_calls.0.id", "", "messages[1].tool_calls[0].id: must not be empty"),
    ("messages.2.tool_call_id", "", "messages[2].tool_call_id: a tool result must name the call it answers"),
    ("messages.0.created_at", "yesterday",
     "messages[0].created_at: must be an ISO 8601 date and time, not 'yesterday'"),
    ("sessions.0.parent", 12345, "sessions[0].parent: names no session listed before this one (id 12345)"),
    ("conversation.title", "t" * 201, "conversation.title: is too long: 201 characters (at most 200)"),
    ("conversation", [], "conversation: must be an object, not a list"),
    ("workspace.files.0.path", "../escape.txt", "workspace.files[0].path: must not hold an empty, . or .. part: "
                                                "'../escape.txt'"),
    ("workspace.files.0.path", "/etc/passwd", "workspace.files[0].path: must be a relative path with / between its "
                                              "parts, not '/etc/passwd'"),
    ("workspace.files.0.data", "not base64!", "workspace.files[0].data: is not valid base64"),
    ("workspace.files.0.sha256", "0" * 64, "workspace.files[0].data: the bytes do not match the sha256 given (the "
                                           "file is damaged)"),
])
def test_a_structurally_wrong_document_is_refused_with_the_path(bob, document, settings, path, value, expected):
    _mutate(document, path, value)
    assert str(refused(document, bob, settings)) == expected
    assert not (Path(settings.HERMES_WORKSPACES_DIR).parent / "escape.txt").exists()


def test_more_wrong_shapes_are_refused(bob, document, settings):
    assert refused("hello", bob, settings).reason.startswith("is not valid JSON")
    assert refused("", bob, settings).reason == "is empty"
    assert refused(b"\xff\xfe\x00", bob, settings).path == "document"
    assert refused({"title": "x"}, bob, settings).path == "document"
    assert refused(42, bob, settings).path == "document"
    second = copy.deepcopy(document["sessions"][0])
    second["id"] = second["id"] + 1
    two = copy.deepcopy(document)
    two["sessions"].append(second)
    assert refused(two, bob, settings).path == "sessions[1].ended_at"
    twice = copy.deepcopy(document)
    twice["workspace"]["files"].append(copy.deepcopy(twice["workspace"]["files"][0]))
    assert refused(twice, bob, settings).path == "workspace.files[1].path"
    event = copy.deepcopy(document)
    event["compaction_events"] = [{"trigger": "manual", "status": "compressed",
                                   "session": document["sessions"][0]["id"], "summary_message": 99_999}]
    assert str(refused(event, bob, settings)) == ("compaction_events[0].summary_message: names nothing of the "
                                                  "document (id 99999)")
    event["compaction_events"][0].update(summary_message=None, trigger="whenever")
    assert refused(event, bob, settings).path == "compaction_events[0].trigger"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), "navy").save(out, "PNG")
    return out.getvalue()


@pytest.fixture
def with_attachment(alice, eager_simulator, django_capture_on_commit_callbacks) -> dict:
    """An export whose user message carries an image, and a workspace file."""
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session_start(conversation=conversation)
    upload = SimpleUploadedFile("room.png", png(), content_type="image/png")
    image = attachment_service.attachment_store(user=alice, conversation_id=conversation.id, upload=upload)
    with django_capture_on_commit_callbacks(execute=True):
        turn = turn_submit(user=alice, conversation_id=conversation.id, text="the room", attachment_ids=[image.id]).turn
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "plan.md").write_text("# Plan\n")
    return json.loads("".join(iter_json(conversation)))


def test_an_attachment_that_an_upload_would_refuse_is_refused(bob, with_attachment, settings):
    document = copy.deepcopy(with_attachment)
    html = b"<!doctype html><script>alert(1)</script>"
    document["attachments"][0]["data"] = base64.b64encode(html).decode()
    document["attachments"][0].pop("sha256")
    error = refused(document, bob, settings)
    assert error.path == "attachments[0].data" and "HTML" in error.reason
    document = copy.deepcopy(with_attachment)
    document["attachments"][0]["name"] = "../../room.png"
    assert refused(document, bob, settings).path == "attachments[0].name"
    assistant = next(m["id"] for m in with_attachment["messages"] if m["role"] == "assistant")
    document = copy.deepcopy(with_attachment)
    document["attachments"][0]["message"] = assistant
    assert refused(document, bob, settings).path == "attachments[0].message"


def test_a_failure_while_writing_takes_back_the_rows_and_the_files_written(bob, with_attachment, settings, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the workspaces folder should be")
    settings.HERMES_WORKSPACES_DIR = blocked
    before = state(settings)
    with pytest.raises(OSError):
        import_document(json.dumps(with_attachment), owner=bob)
    # The attachment's original and thumbnail were written before the workspace failed: gone again.
    assert state(settings) == before
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"
    imported = import_document(json.dumps(with_attachment), owner=bob)
    assert Attachment.objects.get(conversation=imported).path.read_bytes() == png()
