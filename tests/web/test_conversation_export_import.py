"""The JSON export and the import of conversations (docs/export-format.md), on the fast tier:
turns run against the in-process simulator with Celery eager.

A conversation with tool calls, an attachment, a real compaction and a regenerated reply goes
out as JSON and comes back for another user: the same messages with their flags and order, the
same sessions and compaction events, the compacted fact searchable, the workspace and the
attachment's bytes restored, and the next turn and compaction run on it as on any conversation,
while the original stays as it was and the import is its new owner's alone. The commands, an
OpenAI-style messages array, and the export's flat memory on a long conversation too.

Runs on SQLite and on PostgreSQL (DATABASE_URL; the Makefile's BACKEND_TESTS)."""
from __future__ import annotations

import io
import json
import tracemalloc

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse
from PIL import Image

from compression import settings_store
from compression.core.tokens import compute_message_tokens
from compression.models import MCPServer
from sessions.models import ApiCall, Attachment, CompressionEvent, Conversation, Message, Session, Turn
from sessions.services import attachments as attachment_service
from sessions.services.compaction import compression_inline
from sessions.services.context import message_append, session_active, session_start
from sessions.services.conversation_export import FORMAT, iter_json
from sessions.services.conversation_import import import_document
from sessions.services.recall import search, suggest_terms
from sessions.services.turns import turn_regenerate, turn_submit
from sessions.transcript import transcript

pytestmark = pytest.mark.django_db

FACT = "Remember this: the codename of the project is zanzibar-owl, chosen in March."
NOTES = "the launch code is 4417\n"


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(out, "PNG")
    return out.getvalue()


def filler(conversation, pairs: int, tag: str) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"Question {tag}{i}: " + "detail " * 300)
        message_append(session=session, role="assistant", content=f"Answer {tag}{i}: " + "explained " * 300)


def run(user, conversation, text, capture, **extra) -> Turn:
    with capture(execute=True):
        turn = turn_submit(user=user, conversation_id=conversation.id, text=text, **extra).turn
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    return turn


def rich_conversation(alice, capture) -> Conversation:
    """Filler with a fact in the middle, a tool call, an attached image, a real compaction, and a
    reply regenerated after it."""
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k",
                                               title="Project notes", title_manual=True)
    session_start(conversation=conversation)
    filler(conversation, 3, "a")
    session = session_active(conversation)
    message_append(session=session, role="user", content=FACT)
    message_append(session=session, role="assistant", content="Noted: the codename is zanzibar-owl.")
    filler(conversation, 10, "b")
    conversation.workspace.mkdir(parents=True, exist_ok=True)
    (conversation.workspace / "notes.txt").write_text(NOTES)
    (conversation.workspace / "drafts").mkdir()
    (conversation.workspace / "drafts" / "plan.md").write_text("# Plan\n- ship it\n")
    run(alice, conversation, "read notes.txt", capture)
    upload = SimpleUploadedFile("floorplan.png", png(), content_type="image/png")
    image = attachment_service.attachment_store(user=alice, conversation_id=conversation.id, upload=upload)
    run(alice, conversation, "Here is the floor plan", capture, attachment_ids=[image.id])
    outcome = compression_inline(conversation_id=conversation.id, trigger="manual", force=True)
    assert outcome.event.status == "compressed", outcome.event.reason
    run(alice, conversation, "tell me something", capture)
    with capture(execute=True):
        regenerated = turn_regenerate(user=alice, conversation_id=conversation.id).turn
    regenerated.refresh_from_db()
    assert regenerated.status == "done", regenerated.error
    return conversation


def export(conversation) -> str:
    return "".join(iter_json(conversation))


def without_attachment_ids(content):
    """Content with the attachment ids of its parts left out (an import gives new ids)."""
    if not isinstance(content, list):
        return content
    out = []
    for part in content:
        part = {k: ({kk: vv for kk, vv in v.items() if kk != "attachment"} if k in ("_image", "_document") else v)
                for k, v in part.items()}
        out.append(part)
    return out


def messages_shape(conversation) -> list[tuple]:
    sessions = {s: i for i, s in enumerate(Session.objects.filter(conversation=conversation)
                                           .order_by("id").values_list("id", flat=True))}
    return [(sessions[m.session_id], m.seq, m.role, without_attachment_ids(m.content), m.tool_calls, m.tool_call_id,
             m.name, m.token_count, m.archived, m.is_summary, m.visible, m.stopped, m.replaced)
            for m in Message.objects.filter(conversation=conversation).order_by("id")]


def sessions_shape(conversation) -> list[tuple]:
    rows = list(Session.objects.filter(conversation=conversation).order_by("id"))
    index = {s.id: i for i, s in enumerate(rows)}
    return [(index.get(s.parent_id), s.ended_at is None, s.end_reason, s.system_prompt, s.compression_count,
             s.previous_summary) for s in rows]


def events_shape(conversation) -> list[tuple]:
    sessions = {s: i for i, s in enumerate(Session.objects.filter(conversation=conversation)
                                           .order_by("id").values_list("id", flat=True))}
    messages = {m: i for i, m in enumerate(Message.objects.filter(conversation=conversation)
                                           .order_by("id").values_list("id", flat=True))}
    return [(e.trigger, e.status, e.in_place, e.messages_before, e.messages_after, e.tokens_before, e.tokens_after,
             e.summary, e.focus_topic, sessions[e.session_id], sessions.get(e.new_session_id),
             messages.get(e.summary_message_id))
            for e in CompressionEvent.objects.filter(conversation=conversation).order_by("id")]


def workspace_files(conversation) -> dict[str, bytes]:
    root = conversation.workspace
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_conversation_goes_out_and_comes_back_for_another_user_whole(
        client, alice, bob, eager_simulator, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    original = rich_conversation(alice, capture)
    before = (messages_shape(original), sessions_shape(original), events_shape(original), workspace_files(original))
    original_image = Attachment.objects.get(conversation=original)
    document = export(original)
    parsed = json.loads(document)
    assert parsed["format"] == FORMAT == "hermes-web/1"
    assert parsed["settings"]["snapshot"] is False and "export" in parsed["settings"]["note"]

    imported = import_document(document, owner=bob)

    assert imported.id != original.id and imported.owner == bob
    assert (imported.title, imported.title_manual) == ("Project notes", True)
    # The same messages, in the same order, with their roles, content, tool calls, counts and flags.
    assert messages_shape(imported) == before[0]
    roles = [m[2] for m in before[0]]
    assert "tool" in roles and any(m[4] for m in before[0])  # a tool call and its result made it
    assert any(m[8] and m[12] for m in before[0])  # the regenerated reply: archived, replaced
    assert sum(1 for m in before[0] if m[9]) == 1  # one summary
    assert sessions_shape(imported) == before[1] and len(before[1]) == 2
    assert events_shape(imported) == before[2] and before[2][0][1] == "compressed"
    # The compacted fact is found by the agent's recall in the import, in the import only.
    hits = search(conversation_id=imported.id, query="zanzibar owl codename", compacted_only=True)
    assert hits and "zanzibar" in hits[0].snippet and hits[0].compacted
    assert Message.objects.get(id=hits[0].id).conversation_id == imported.id
    assert "zanzibar" in suggest_terms(conversation_id=imported.id, query="zanzibr")  # the word list too
    # The workspace and the attachment's bytes, restored; the attachment linked as it was.
    assert workspace_files(imported) == before[3] and workspace_files(imported)["notes.txt"] == NOTES.encode()
    image = Attachment.objects.get(conversation=imported)
    assert image.owner == bob and image.id != original_image.id
    assert image.path.read_bytes() == original_image.path.read_bytes() and image.thumbnail_path.exists()
    assert image.message.conversation_id == imported.id and image.turn.user_message_id == image.message_id
    assert image.message.content[1]["_image"]["attachment"] == image.id
    entry = next(e for e in transcript(imported) if e["kind"] == "message" and e["attachments"])
    assert entry["attachments"][0]["name"] == "floorplan.png"

    # The page is bob's alone.
    client.force_login(alice)
    assert client.get(reverse("conversation", args=[imported.id])).status_code == 404
    client.force_login(bob)
    assert client.get(reverse("conversation", args=[imported.id])).status_code == 200

    # It continues like any other: a turn (the tool reads the restored workspace, the prompt is
    # cached), then a compaction that rotates from the imported active session.
    calls_before = ApiCall.objects.filter(conversation=imported).count()
    turn = run(bob, imported, "read notes.txt", capture)
    new = list(Message.objects.filter(conversation=imported, id__gt=turn.user_message_id).order_by("id"))
    assert [m.role for m in new] == ["assistant", "tool", "assistant"] and "4417" in new[1].content
    calls = list(ApiCall.objects.filter(conversation=imported, purpose="agent").order_by("id"))
    assert len(calls) - calls_before == 2
    assert calls[-1].cache_read_tokens > 0  # the second request of the turn reads the cached prefix
    active = session_active(imported)
    outcome = compression_inline(conversation_id=imported.id, trigger="manual", force=True)
    assert outcome.compressed and outcome.session.parent_id == active.id

    # The original was not touched.
    assert (messages_shape(original), sessions_shape(original), events_shape(original),
            workspace_files(original)) == before
    assert Attachment.objects.get(conversation=original).path.read_bytes() == png()


def test_it_imports_an_openai_messages_array_in_both_shapes(bob, eager_simulator, django_capture_on_commit_callbacks):
    messages = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "What is the capital of Mongolia?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "lookup", "arguments": "{\"q\": \"Mongolia\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "Ulaanbaatar, pop. 1.6 million"},
        {"role": "assistant", "content": "Ulaanbaatar."},
    ]
    for document in (json.dumps(messages).encode(), {"messages": messages}):
        source = document if isinstance(document, bytes) else io.BytesIO(json.dumps(document).encode())
        conversation = import_document(source, owner=bob)
        rows = list(Message.objects.filter(conversation=conversation).order_by("id"))
        assert [(m.role, m.content, m.tool_calls, m.tool_call_id, m.seq) for m in rows] == [
            (m["role"], m["content"], m.get("tool_calls"), m.get("tool_call_id", ""), i)
            for i, m in enumerate(messages)]
        assert all(m.visible and not m.archived for m in rows)
        for row, message in zip(rows, messages):
            assert row.token_count == compute_message_tokens(message) > 0
        assert conversation.title == "What is the capital of Mongolia?"
        hits = search(conversation_id=conversation.id, query="Ulaanbaatar million")
        assert hits[0].role == "tool" and hits[0].id == rows[3].id  # the message holding both words first
        assert Session.objects.filter(conversation=conversation).count() == 1
    turn = run(bob, conversation, "and of Chile?", django_capture_on_commit_callbacks)
    assert Message.objects.filter(conversation=conversation, id__gt=turn.user_message_id, role="assistant").exists()
    assert Conversation.objects.get(id=conversation.id).title == "What is the capital of Mongolia?"


def small_conversation(owner) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, provider="simulator", model="sim-claude-200k")
    session = session_start(conversation=conversation)
    message_append(session=session, role="user", content="List the files, please.")
    message_append(session=session, role="assistant", content=None, tool_calls=[
        {"id": "call_7", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}])
    message_append(session=session, role="tool", content="notes.txt", tool_call_id="call_7", name="list_files")
    message_append(session=session, role="assistant", content="There is **notes.txt**.")
    conversation.workspace.mkdir(parents=True)
    (conversation.workspace / "notes.txt").write_text(NOTES)
    return conversation


def test_the_commands_export_to_standard_output_or_a_file_and_import_for_a_user(alice, bob, tmp_path):
    conversation = small_conversation(alice)
    out = io.StringIO()
    call_command("export_conversation", str(conversation.id), stdout=out)
    document = json.loads(out.getvalue())
    assert document["format"] == FORMAT and [m["role"] for m in document["messages"]] == [
        "user", "assistant", "tool", "assistant"]
    assert document["workspace"]["files"][0]["path"] == "notes.txt"
    target = tmp_path / "out" / "conversation.json"
    target.parent.mkdir()
    said = io.StringIO()
    call_command("export_conversation", str(conversation.id), "--output", str(target), stdout=said)
    assert "wrote" in said.getvalue()
    written = json.loads(target.read_text())
    assert {k: v for k, v in written.items() if k != "exported_at"} == {
        k: v for k, v in document.items() if k != "exported_at"}
    markdown = io.StringIO()
    call_command("export_conversation", str(conversation.id), "--format", "markdown", stdout=markdown)
    assert markdown.getvalue().startswith("#") and "notes.txt" in markdown.getvalue()
    with pytest.raises(CommandError, match="no conversation"):
        call_command("export_conversation", "not-an-id", stdout=io.StringIO())

    out = io.StringIO()
    call_command("import_conversation", str(target), "--user", "bob", stdout=out, stderr=io.StringIO())
    imported = Conversation.objects.get(id=out.getvalue().strip())
    assert imported.owner == bob and imported.messages.count() == 4
    assert (imported.workspace / "notes.txt").read_text() == NOTES

    count = Conversation.objects.count()
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("import_conversation", str(target), "--user", "nobody", stdout=io.StringIO())
    cut = tmp_path / "cut.json"
    cut.write_text(target.read_text()[:200])
    with pytest.raises(CommandError, match="refused, nothing was imported: document: .*cut short"):
        call_command("import_conversation", str(cut), "--user", "bob", stdout=io.StringIO())
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_conversation", str(tmp_path / "missing.json"), "--user", "bob", stdout=io.StringIO())
    assert Conversation.objects.count() == count


def test_the_export_holds_no_secret(alice):
    settings_store.save_group("auxiliary", {"provider": "custom", "model": "aux-model", "api_key": "sk-aux-secret-1",
                                            "base_url": "https://someone:pa55word@aux.example/v1?key=query-secret-2"})
    settings_store.save_group("model", {"api_key": "sk-main-secret-3"})
    MCPServer.objects.create(name="files", command="/usr/bin/mcp-files", env='{"TOKEN": "mcp-env-secret-4"}',
                             headers='{"Authorization": "Bearer mcp-header-secret-5"}')
    conversation = small_conversation(alice)
    conversation.mcp_off = ["files"]
    conversation.save()
    document = export(conversation)
    for secret in ("sk-aux-secret-1", "pa55word", "query-secret-2", "sk-main-secret-3", "mcp-env-secret-4",
                   "mcp-header-secret-5", "api_key"):
        assert secret not in document
    aux = json.loads(document)["settings"]["auxiliary"]
    assert (aux["base_url"], aux["effective_provider"], aux["effective_model"]) == (
        "https://aux.example/v1", "custom", "aux-model")
    assert json.loads(document)["conversation"]["mcp_off"] == ["files"]


def test_the_export_of_a_long_conversation_streams_in_flat_memory(alice):
    conversation = Conversation.objects.create(owner=alice)
    session = session_start(conversation=conversation)
    Message.objects.bulk_create(
        [Message(conversation=conversation, session=session, seq=i, role=("user", "assistant")[i % 2],
                 content=f"message {i}: " + "lorem ipsum dolor " * 110, token_count=500) for i in range(2000)],
        batch_size=500)
    whole = export(conversation)  # the modules are imported and the caches warm before measuring
    assert len(json.loads(whole)["messages"]) == 2000
    tracemalloc.start()
    try:
        chunks = size = 0
        for chunk in iter_json(conversation):
            chunks += 1
            size += len(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert chunks > 2000  # a chunk per message at least
    assert size >= 4_000_000
    assert peak < size / 4, f"peak {peak:,} bytes for a {size:,}-character document"
