"""Attachments on the fast tier (Django test client; turns run against the in-process simulator
with Celery eager): every documented limit refused with a clear reason and nothing half-stored,
files served only to their owner with safe headers, the cascade on deletion, and the message
parts the model receives for an image (scaled), a PDF (with and without a text layer) and a text
file (written into the workspace under a free name)."""
from __future__ import annotations

import base64
import io
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from compression.core.media import image_scaled_size, named_placeholder, strip_historical_images
from sessions.agent.tools.files import read_file
from sessions.agent.tools.workspace import workspace_root
from sessions.models import Attachment, Conversation, Message, Turn
from sessions.services import attachments as service
from sessions.services.context import session_start
from sessions.services.conversations import conversation_delete
from sessions.services.recall import expand
from tests.media_files import text_pdf

HTMX = {"HTTP_HX_REQUEST": "true"}
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    session_start(conversation=c)
    return c


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


def png(width: int = 64, height: int = 48, color="teal") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def pdf_scanned(pages: int = 3) -> bytes:
    """A PDF of images only: no text layer."""
    out = io.BytesIO()
    frames = [Image.new("RGB", (200, 260), "white") for _ in range(pages)]
    frames[0].save(out, "PDF", save_all=True, append_images=frames[1:])
    return out.getvalue()


SVG = b'<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'


def upload(client, conversation, filename: str, data: bytes, content_type: str = "application/octet-stream", **extra):
    body = {"file": SimpleUploadedFile(filename, data, content_type=content_type), **extra}
    return client.post(reverse("attachment-upload", args=[conversation.id]), body)


def stored_files(settings) -> list[Path]:
    root = Path(settings.HERMES_ATTACHMENTS_DIR)
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def send(client, conversation, text: str, ids, capture):
    with capture(execute=True):
        return client.post(reverse("conversation-send", args=[conversation.id]),
                           {"text": text, "attachments": [str(i) for i in ids]}, **HTMX)


def assert_nothing_stored(settings, conversation):
    assert not Attachment.objects.filter(conversation=conversation).exists()
    assert stored_files(settings) == []


# ---------------------------------------------------------------- uploads and their limits

def test_it_stores_an_image_as_a_pending_attachment_and_answers_its_chip(alice_client, conversation, settings):
    response = upload(alice_client, conversation, "holiday photo.png", png(), "image/png")
    assert response.status_code == 201
    body = response.json()
    row = Attachment.objects.get()
    assert body == {"id": row.id, "name": "holiday photo.png", "size": row.size, "size_label": service.human_size(row.size),
                    "kind": "image", "url": f"/attachments/{row.id}",
                    "thumbnail_url": f"/attachments/{row.id}/thumbnail", "note": ""}
    assert (row.kind, row.media_type, row.width, row.height, row.turn, row.message) == ("image", "image/png", 64, 48,
                                                                                      None, None)
    assert row.path.read_bytes() == png() and row.thumbnail_path.exists()
    assert "holiday" not in str(row.path)  # stored under a random name, never the user's
    listed = alice_client.get(reverse("attachment-upload", args=[conversation.id])).json()
    assert [a["id"] for a in listed["attachments"]] == [row.id]
    assert listed["max_bytes"] == settings.HERMES_ATTACHMENT_MAX_BYTES


def test_a_file_over_the_size_limit_is_refused_and_nothing_is_stored(alice_client, conversation, settings):
    settings.HERMES_ATTACHMENT_MAX_BYTES = 1000
    response = upload(alice_client, conversation, "notes.txt", b"x" * 2000, "text/plain")
    assert response.status_code == 413
    assert response.json()["error"] == "“notes.txt” is 2.0 KB; a file may be at most 1000 bytes. Nothing was stored."
    # A body far over the limit is refused before it is read.
    response = upload(alice_client, conversation, "big.txt", b"y" * 200_000, "text/plain")
    assert response.status_code == 413 and "at most 1000 bytes" in response.json()["error"]
    assert_nothing_stored(settings, conversation)


def test_the_type_comes_from_the_content_not_the_name(alice_client, conversation, settings):
    binary = upload(alice_client, conversation, "notes.txt", b"\x00\x01\x02binary\xff" * 10)
    assert binary.status_code == 400
    assert "is not a type that can be attached" in binary.json()["error"]
    text_as_image = upload(alice_client, conversation, "photo.png", b"just some text\n", "image/png")
    assert text_as_image.status_code == 400
    assert text_as_image.json()["error"] == ("“photo.png” is named like an image but its content is not a PNG, JPEG, "
                                             "GIF or WebP image.")
    not_a_pdf = upload(alice_client, conversation, "report.pdf", b"hello", "application/pdf")
    assert not_a_pdf.status_code == 400 and "not a PDF" in not_a_pdf.json()["error"]
    damaged_pdf = upload(alice_client, conversation, "report.pdf", b"%PDF-1.4\n garbage", "application/pdf")
    assert damaged_pdf.status_code == 400 and "cannot be read as one" in damaged_pdf.json()["error"]
    bmp = io.BytesIO()
    Image.new("RGB", (8, 8)).save(bmp, "BMP")
    refused_bmp = upload(alice_client, conversation, "icon.bmp", bmp.getvalue(), "image/bmp")
    assert refused_bmp.status_code == 400 and "must be PNG, JPEG, GIF or WebP" in refused_bmp.json()["error"]
    assert_nothing_stored(settings, conversation)
    # A PNG named .txt is an image all the same.
    assert upload(alice_client, conversation, "notes.txt", png(), "text/plain").json()["kind"] == "image"


def test_an_svg_posing_as_a_png_and_html_posing_as_an_image_are_refused(alice_client, conversation, settings):
    response = upload(alice_client, conversation, "logo.png", SVG, "image/png")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error.startswith("“logo.png” is SVG markup, not a PNG, JPEG, GIF or WebP image.") and "scripts" in error
    assert upload(alice_client, conversation, "logo.svg", SVG, "image/svg+xml").status_code == 400
    html = upload(alice_client, conversation, "cat.jpg", b"<!DOCTYPE html><html><script>x()</script></html>", "image/jpeg")
    assert html.status_code == 400 and "HTML markup" in html.json()["error"]
    assert_nothing_stored(settings, conversation)
    # HTML source as a text file (not posing as an image) is text for the workspace.
    assert upload(alice_client, conversation, "page.html", b"<html><body>hi</body></html>", "text/html").json()["kind"] == "text"


def test_a_name_holding_a_path_is_refused_and_others_are_cleaned(alice_client, conversation, settings):
    for name in ("../../etc/passwd.txt", "..\\windows\\evil.txt", "a/b.txt", ".."):
        response = upload(alice_client, conversation, "x.txt", b"hello\n", "text/plain", name=name)
        assert response.status_code == 400, name
        assert "a name cannot hold a path" in response.json()["error"]
    assert_nothing_stored(settings, conversation)
    # The multipart file name itself is cut to its last part by Django; what is kept is clean.
    assert upload(alice_client, conversation, "../evil.txt", b"hello\n", "text/plain").json()["name"] == "evil.txt"
    assert upload(alice_client, conversation, "x", b"hi\n", name='.hidden<>:"|?*\x07.md').json()["name"] == "hidden_______.md"
    root = Path(settings.HERMES_ATTACHMENTS_DIR).resolve()
    assert all(root in p.resolve().parents for p in stored_files(settings))


def test_a_message_carries_at_most_the_configured_number_of_attachments(alice_client, conversation, settings,
                                                                        django_capture_on_commit_callbacks):
    settings.HERMES_ATTACHMENTS_PER_MESSAGE = 3
    ids = [upload(alice_client, conversation, f"n{i}.txt", b"note\n").json()["id"] for i in range(3)]
    fourth = upload(alice_client, conversation, "n4.txt", b"note\n")
    assert fourth.status_code == 400
    assert fourth.json()["error"] == "A message may carry at most 3 attachments; remove one before adding “n4.txt”."
    assert Attachment.objects.count() == 3
    settings.HERMES_ATTACHMENTS_PER_MESSAGE = 2
    response = send(alice_client, conversation, "three files", ids, django_capture_on_commit_callbacks)
    assert response.status_code == 422
    assert "at most 2 attachments (this one has 3)" in response.content.decode()
    assert not Turn.objects.exists()
    assert Attachment.objects.filter(turn__isnull=True).count() == 3  # nothing lost: still pending


def test_an_upload_needs_the_csrf_token_and_a_login(alice, conversation, settings):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert upload(strict, conversation, "a.png", png()).status_code == 403
    assert upload(Client(), conversation, "a.png", png()).status_code == 302  # to the login page
    assert_nothing_stored(settings, conversation)


def test_an_image_is_sent_upright_as_its_exif_orientation_says(alice, conversation):
    rotated = Image.new("RGB", (300, 200), "red")
    exif = rotated.getexif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    out = io.BytesIO()
    rotated.save(out, "JPEG", exif=exif)
    row = service.attachment_store(user=alice, conversation_id=conversation.id,
                                   upload=SimpleUploadedFile("phone.jpg", out.getvalue(), content_type="image/jpeg"))
    assert (row.width, row.height) == (200, 300)
    data, media_type, width, height = service.image_for_model(row.path.read_bytes())
    assert (media_type, width, height) == ("image/jpeg", 200, 300)
    assert Image.open(io.BytesIO(data)).size == (200, 300)


def test_a_failed_upload_leaves_nothing_half_stored(alice, conversation, settings, monkeypatch):
    def broken_save(self, *args, **kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(Attachment, "save", broken_save)
    with pytest.raises(RuntimeError):
        service.attachment_store(user=alice, conversation_id=conversation.id,
                                 upload=SimpleUploadedFile("a.png", png(), content_type="image/png"))
    assert stored_files(settings) == []


def test_a_pending_attachment_can_be_removed_and_old_pending_ones_are_swept(alice_client, conversation, settings,
                                                                           django_capture_on_commit_callbacks):
    first = upload(alice_client, conversation, "a.png", png()).json()["id"]
    second = upload(alice_client, conversation, "b.txt", b"b\n").json()["id"]
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.delete(reverse("attachment-remove", args=[conversation.id, first]))
    assert response.status_code == 200
    assert list(Attachment.objects.values_list("id", flat=True)) == [second]
    assert len(stored_files(settings)) == 1
    Attachment.objects.filter(id=second).update(created_at=timezone.now() - timedelta(hours=25))
    with django_capture_on_commit_callbacks(execute=True):
        assert service.attachments_sweep() == 1
    assert_nothing_stored(settings, conversation)


# ---------------------------------------------------------------- isolation and serving

def test_files_are_served_only_to_their_owner_with_safe_headers(client, alice_client, alice, bob, conversation,
                                                                 django_capture_on_commit_callbacks):
    image = upload(alice_client, conversation, "a.png", png()).json()
    pdf = upload(alice_client, conversation, "report.pdf", text_pdf(["one", "two"])).json()
    text = upload(alice_client, conversation, "notes.md", b"# notes\n").json()
    served = alice_client.get(image["url"])
    assert served.status_code == 200 and b"".join(served.streaming_content) == png()
    assert served["Content-Type"] == "image/png"
    assert served["Content-Disposition"] == 'inline; filename="a.png"'
    assert served["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'self'" in served["Content-Security-Policy"]
    thumb = alice_client.get(image["thumbnail_url"])
    assert thumb.status_code == 200 and thumb["Content-Type"] in ("image/png", "image/jpeg")
    as_pdf = alice_client.get(pdf["url"])
    assert (as_pdf["Content-Type"], as_pdf["Content-Disposition"]) == ("application/pdf",
                                                                       'attachment; filename="report.pdf"')
    as_text = alice_client.get(text["url"])
    assert as_text["Content-Type"] == "text/plain; charset=utf-8"
    assert as_text["Content-Disposition"] == 'attachment; filename="notes.md"'

    client.logout()
    client.force_login(bob)
    for url in (image["url"], image["thumbnail_url"], pdf["url"], text["url"]):
        assert client.get(url).status_code == 404, url
    assert client.delete(reverse("attachment-remove", args=[conversation.id, image["id"]])).status_code == 404
    assert upload(client, conversation, "b.png", png()).status_code == 404  # not his conversation
    assert client.get(reverse("attachment-upload", args=[conversation.id])).status_code == 404
    # He cannot claim it from his own conversation either.
    his = Conversation.objects.create(owner=bob, provider="simulator", model="sim-claude-200k")
    session_start(conversation=his)
    refused = send(client, his, "look at this", [image["id"]], django_capture_on_commit_callbacks)
    assert refused.status_code == 422 and "no longer available" in refused.content.decode()
    assert not Turn.objects.filter(conversation=his).exists()
    assert Attachment.objects.filter(turn__isnull=True).count() == 3


def test_deleting_a_conversation_deletes_its_attachments_files(alice_client, alice, bob, conversation, settings,
                                                               django_capture_on_commit_callbacks, eager_simulator):
    upload(alice_client, conversation, "a.png", png())
    sent = upload(alice_client, conversation, "b.txt", b"sent\n").json()["id"]
    assert send(alice_client, conversation, "here", [sent], django_capture_on_commit_callbacks).status_code == 200
    kept = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k")
    upload(alice_client, kept, "kept.png", png())
    assert len(stored_files(settings)) == 5  # two images with their thumbnails, one text file
    with django_capture_on_commit_callbacks(execute=True):
        conversation_delete(user=alice, conversation_id=conversation.id)
    assert list(Attachment.objects.values_list("name", flat=True)) == ["kept.png"]
    assert not (Path(settings.HERMES_ATTACHMENTS_DIR) / str(conversation.id)).exists()
    assert len(stored_files(settings)) == 2


# ---------------------------------------------------------------- what the model receives

def test_a_big_image_reaches_the_model_scaled_and_the_transcript_keeps_the_original(
        alice_client, conversation, django_capture_on_commit_callbacks, eager_simulator):
    original = png(3000, 2000)
    image = upload(alice_client, conversation, "chart.png", original).json()
    small = upload(alice_client, conversation, "icon.png", png(200, 100)).json()
    response = send(alice_client, conversation, "What do these show?", [image["id"], small["id"]],
                    django_capture_on_commit_callbacks)
    assert response.status_code == 200
    turn = Turn.objects.get()
    assert turn.status == "done", turn.error
    content = turn.user_message.content
    assert content[0] == {"type": "text", "text": "What do these show?\n\n[attached image: chart.png (17.0 KB)]\n"
                                                  "[attached image: icon.png (313 bytes)]"
                          .replace("17.0 KB", service.human_size(len(original)))
                          .replace("313 bytes", service.human_size(small["size"]))}
    big, little = content[1], content[2]
    assert big["type"] == "image_url" and big["image_url"]["url"].startswith("data:image/png;base64,")
    width, height = image_scaled_size(3000, 2000)
    assert (width, height) == (1357, 905)  # at most ~1,600 tokens (784×1568 px), the aspect ratio kept
    assert big["_image"] == {"width": width, "height": height, "name": "chart.png", "attachment": image["id"]}
    sent = Image.open(io.BytesIO(base64.b64decode(big["image_url"]["url"].split(",", 1)[1])))
    assert sent.size == (width, height)
    # A small image is sent as it is.
    assert little["_image"]["width"] == 200 and base64.b64decode(little["image_url"]["url"].split(",", 1)[1]) == png(200, 100)
    assert set(Attachment.objects.values_list("message_id", flat=True)) == {turn.user_message_id}
    assert Attachment.objects.get(id=image["id"]).path.read_bytes() == original  # the original is kept

    page = alice_client.get(reverse("conversation", args=[conversation.id])).content.decode()
    user_entry = re.search(r'<article class="entry user[^>]*>.*?</article>', page, re.S).group(0)
    assert f'href="/attachments/{image["id"]}"' in user_entry
    assert f'src="/attachments/{image["id"]}/thumbnail"' in user_entry
    # The text as typed; the lines naming the files are for the model.
    assert '<div class="text plain">What do these show?</div>' in user_entry and "[attached" not in user_entry


def test_the_scaling_rule_follows_the_vision_guide():
    # The guide's table of the largest sizes sent unscaled.
    for size in ((1092, 1092), (951, 1268), (896, 1344), (819, 1456), (784, 1568)):
        assert image_scaled_size(*size) == size
    assert image_scaled_size(4000, 1000) == (1568, 392)  # the long edge
    for size in ((2000, 2000), (8000, 6000), (1600, 40), (1200, 1100)):
        w, h = image_scaled_size(*size)
        assert w * h <= 784 * 1568 and max(w, h) <= 1568, size  # ~1,600 tokens at w*h/750
        assert abs(w / h - size[0] / size[1]) < 0.05 * size[0] / size[1], size  # the aspect ratio kept


def test_a_pdf_becomes_a_document_part_with_its_text(alice, alice_client, conversation, django_capture_on_commit_callbacks):
    pdf = upload(alice_client, conversation, "report.pdf", text_pdf(["Quarterly revenue", "Second page"])).json()
    assert (pdf["kind"], pdf["note"]) == ("pdf", "")
    with django_capture_on_commit_callbacks(execute=False):
        assert send(alice_client, conversation, "Summarise it", [pdf["id"]], django_capture_on_commit_callbacks).status_code == 200
    turn = Turn.objects.get()
    text, document = service.message_content(turn)
    assert text["text"] == f"Summarise it\n\n[attached PDF: report.pdf (2 pages, {service.human_size(pdf['size'])})]"
    assert document["type"] == "document"
    assert document["source"]["type"] == "base64" and document["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(document["source"]["data"]) == text_pdf(["Quarterly revenue", "Second page"])
    meta = document["_document"]
    assert (meta["name"], meta["pages"], meta["attachment"]) == ("report.pdf", 2, pdf["id"])
    assert [page.strip() for page in meta["text"].split("\f")] == ["Quarterly revenue", "Second page"]


def test_a_pdf_without_a_text_layer_says_so_to_the_user(alice_client, conversation, django_capture_on_commit_callbacks):
    pdf = upload(alice_client, conversation, "scan.pdf", pdf_scanned(3)).json()
    assert pdf["note"] == "scan.pdf: no text layer: on routes without PDF support the model cannot read it"
    with django_capture_on_commit_callbacks(execute=False):
        send(alice_client, conversation, "", [pdf["id"]], django_capture_on_commit_callbacks)
    text, document = service.message_content(Turn.objects.get())
    assert text["text"] == (f"[attached PDF: scan.pdf (3 pages, {service.human_size(pdf['size'])}; no text layer: "
                            "on routes without PDF support the model cannot read it)]")
    assert document["_document"]["pages"] == 3 and not document["_document"]["text"].strip()


def test_a_text_file_goes_into_the_workspace_under_a_free_name(alice, alice_client, conversation,
                                                               django_capture_on_commit_callbacks, eager_simulator):
    workspace = workspace_root(conversation.workspace)
    (workspace / "notes.md").write_text("the user's own notes\n")
    body = "# Plan\n\n- ship attachments\n- ünïcode stays\n".encode()
    text = upload(alice_client, conversation, "notes.md", body, "text/markdown").json()
    assert text["kind"] == "text"
    response = send(alice_client, conversation, "Read my plan", [text["id"]], django_capture_on_commit_callbacks)
    assert response.status_code == 200
    turn = Turn.objects.get()
    assert turn.status == "done", turn.error
    assert turn.user_message.content == [{"type": "text", "text": f"Read my plan\n\n[attached: notes-2.md "
                                                                  f"({service.human_size(len(body))}) in the workspace]"}]
    assert (workspace / "notes.md").read_text() == "the user's own notes\n"  # never overwritten
    assert (workspace / "notes-2.md").read_bytes() == body
    assert "ship attachments" in read_file(workspace, path="notes-2.md", max_chars=10_000)
    page = alice_client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert f'href="/attachments/{text["id"]}" download="notes.md"' in page


def test_a_command_takes_no_attachments_and_a_message_may_be_attachments_only(
        alice_client, conversation, django_capture_on_commit_callbacks, eager_simulator):
    image = upload(alice_client, conversation, "a.png", png()).json()
    refused = send(alice_client, conversation, "/compress", [image["id"]], django_capture_on_commit_callbacks)
    assert refused.status_code == 422 and "Commands take no attachments" in refused.content.decode()
    assert Attachment.objects.get().turn is None
    assert send(alice_client, conversation, "", [image["id"]], django_capture_on_commit_callbacks).status_code == 200
    turn = Turn.objects.get()
    assert turn.status == "done" and turn.user_message.content[0]["text"].startswith("[attached image: a.png")


def test_a_cancelled_turn_gives_its_attachments_back(alice, alice_client, conversation, django_capture_on_commit_callbacks):
    from sessions.services.turns import turn_cancel

    image = upload(alice_client, conversation, "a.png", png()).json()
    with django_capture_on_commit_callbacks(execute=False):
        alice_client.post(reverse("conversation-send", args=[conversation.id]),
                          {"text": "later", "attachments": [image["id"]]}, **HTMX)
    turn = Turn.objects.get()
    assert Attachment.objects.get().turn == turn
    turn_cancel(user=alice, conversation_id=conversation.id, turn_id=turn.id)
    assert Attachment.objects.get().turn is None


# ---------------------------------------------------------------- after a compaction

def test_a_compacted_image_is_named_and_recall_says_it_can_be_re_attached(
        alice_client, conversation, django_capture_on_commit_callbacks, eager_simulator):
    first = upload(alice_client, conversation, "floorplan.png", png(300, 200)).json()
    send(alice_client, conversation, "Here is the floor plan", [first["id"]], django_capture_on_commit_callbacks)
    second = upload(alice_client, conversation, "kitchen.png", png(120, 90)).json()
    send(alice_client, conversation, "And the kitchen", [second["id"]], django_capture_on_commit_callbacks)
    rows = list(Message.objects.filter(conversation=conversation, role="user").order_by("id"))
    assert [t.status for t in Turn.objects.order_by("id")] == ["done", "done"]
    stripped = strip_historical_images([m.as_chat() for m in rows])
    # The older image is the placeholder now; the message's text still names the file.
    assert stripped[0]["content"][1] == {"type": "text", "text": named_placeholder("floorplan.png")}
    assert "[attached image: floorplan.png" in stripped[0]["content"][0]["text"]
    assert stripped[1]["content"][1]["type"] == "image_url"
    # context_expand of that message: an image was there, its name, and that it can be re-attached.
    text = expand(conversation_id=conversation.id, ref=f"m{rows[0].id}", before=0, after=0)["messages"][0]["text"]
    assert "Here is the floor plan" in text
    assert "An image, “floorplan.png” (300×200 px as sent), was attached here by the user" in text
    assert "ask the user to re-attach it" in text and "base64" not in text


def test_after_a_compaction_the_model_gets_the_placeholder_and_the_page_keeps_the_image(
        alice_client, conversation, django_capture_on_commit_callbacks, eager_simulator):
    from sessions.services.compaction import compression_inline

    first = upload(alice_client, conversation, "floorplan.png", png(300, 200)).json()
    send(alice_client, conversation, "Here is the floor plan", [first["id"]], django_capture_on_commit_callbacks)
    second = upload(alice_client, conversation, "kitchen.png", png(120, 90)).json()
    send(alice_client, conversation, "And the kitchen", [second["id"]], django_capture_on_commit_callbacks)
    for i in range(6):
        send(alice_client, conversation, f"reply with 300 words about room {i}", [], django_capture_on_commit_callbacks)
    before = [e for e in eager_simulator.sim.stats()["log"] if e.get("status", 200) == 200][-1]
    assert [(i["width"], i["height"]) for i in before["images"]] == [(300, 200), (120, 90)]
    with django_capture_on_commit_callbacks(execute=True):
        outcome = compression_inline(conversation_id=conversation.id, trigger="manual", force=True)
    assert outcome.compressed, outcome.event.reason
    eager_simulator.sim.reset()
    send(alice_client, conversation, "What did the floor plan show?", [], django_capture_on_commit_callbacks)
    # The request after the compaction: the newest user image goes, an older one is its placeholder.
    request = [e for e in eager_simulator.sim.stats()["log"] if e.get("status", 200) == 200][-1]
    assert [(i["width"], i["height"]) for i in request.get("images", [])] == [(120, 90)]
    from sessions.services.context import context_messages, session_active

    sent = str(context_messages(session_active(conversation)))
    assert named_placeholder("floorplan.png") in sent and sent.count("data:image/png;base64") == 1
    # The transcript still shows both images, with links to the originals.
    page = alice_client.get(reverse("conversation", args=[conversation.id])).content.decode()
    for attachment in Attachment.objects.filter(conversation=conversation, kind="image"):
        assert f'href="/attachments/{attachment.id}"' in page
