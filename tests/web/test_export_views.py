"""The export and import views (sessions/views_export.py, sessions/views_import.py): the downloads'
headers and streaming, under WSGI and ASGI; the transcript read as a page, its structure checked
with an HTML parser; the owner alone sees any of them; an import of either accepted shape makes a
conversation of the uploader's, a refused one names the bad field and writes nothing; CSRF holds."""
from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, Client
from django.urls import reverse

from sessions.models import Conversation, Message
from sessions.services.context import message_append, session_start
from tests.web.test_export_markdown import HOSTILE, build, parse_html, section

pytestmark = pytest.mark.django_db

DOWNLOADS = ("conversation-export-json", "conversation-export-markdown")
PAGES = (*DOWNLOADS, "conversation-export-document")


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, title="Plans: <b>Q3</b> & more / notes", provider="simulator",
                                    model="sim-claude-64k")
    session = session_start(conversation=c)
    message_append(session=session, role="user", content="How do I stream a download?")
    message_append(session=session, role="assistant", content="Use **StreamingHttpResponse**.")
    message_append(session=session, role="user", content=HOSTILE)
    return c


def body(response) -> str:
    assert response.streaming
    return b"".join(response.streaming_content).decode()


# Downloads --------------------------------------------------------------------------------------------

def test_the_json_download_streams_the_complete_record(signed_in, conversation):
    response = signed_in.get(reverse("conversation-export-json", args=[conversation.id]))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="plans-bq3b-more-notes-{conversation.created_at:%Y-%m-%d}.json"'
    assert response["X-Content-Type-Options"] == "nosniff" and "no-store" in response["Cache-Control"]
    document = json.loads(body(response))
    assert document["format"] == "hermes-web/1"
    assert [m["content"] for m in document["messages"]] == ["How do I stream a download?",
                                                             "Use **StreamingHttpResponse**.", HOSTILE]


def test_the_markdown_download_is_the_transcript(signed_in, conversation):
    response = signed_in.get(reverse("conversation-export-markdown", args=[conversation.id]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="plans-bq3b-more-notes-')
    text = body(response)
    assert text.startswith("# Plans: &lt;b&gt;Q3&lt;/b&gt; &amp; more / notes\n")
    assert [line.split(" · ")[0] for line in text.splitlines() if line.startswith("### ")] == ["### User",
                                                                                            "### Assistant",
                                                                                            "### User"]
    assert "Use **StreamingHttpResponse**." in text
    assert "&lt;/details>&lt;script>alert(1)&lt;/script>" in text and "<script>" not in text


def test_a_title_without_letters_still_gives_a_file_name(signed_in, conversation):
    Conversation.objects.filter(id=conversation.id).update(title="«»")
    response = signed_in.get(reverse("conversation-export-markdown", args=[conversation.id]))
    assert re.fullmatch(r'attachment; filename="conversation-\d{4}-\d\d-\d\d\.md"', response["Content-Disposition"])


def test_under_asgi_the_downloads_stream_from_an_async_iterator(alice, conversation):
    """Daphne's path: a synchronous stream would be read whole into memory by Django first."""
    sync = Client()
    sync.force_login(alice)

    async def fetch(name: str):
        client = AsyncClient()
        client.cookies = sync.cookies
        response = await client.get(reverse(name, args=[conversation.id]))
        return response, b"".join([piece async for piece in response.streaming_content]).decode()

    for name in DOWNLOADS:
        response, text = async_to_sync(fetch)(name)  # the view's database work on this thread's connection
        assert response.status_code == 200 and response.is_async
        expected = body(sync.get(reverse(name, args=[conversation.id])))
        assert moment_left_out(text) == moment_left_out(expected)


def moment_left_out(text: str) -> str:
    """An export without the moment it was made."""
    text = re.sub(r'"exported_at":"[^"]*"', '"exported_at":""', text)
    return re.sub(r"Exported from Hermes Web on [^·]*·", "Exported from Hermes Web on ·", text)


@pytest.mark.parametrize("name", PAGES)
def test_another_users_conversation_is_not_found(client, bob, conversation, name):
    client.force_login(bob)
    assert client.get(reverse(name, args=[conversation.id])).status_code == 404


@pytest.mark.parametrize("name", PAGES)
def test_an_anonymous_visitor_is_sent_to_log_in(client, conversation, name):
    url = reverse(name, args=[conversation.id])
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert "plans" not in response.content.decode().lower()


@pytest.mark.parametrize("name", PAGES)
def test_the_exports_answer_only_get(signed_in, conversation, name):
    assert signed_in.post(reverse(name, args=[conversation.id])).status_code == 405


def test_the_conversation_page_links_to_the_exports(signed_in, conversation):
    page = parse_html(signed_in.get(reverse("conversation", args=[conversation.id])).content.decode())
    box = page.find("details", id="export-share")[0]
    links = {a.text(): a.attrs["href"] for a in box.iter("a") if a.attrs.get("id", "").startswith("export-")}
    assert links == {"Download JSON": reverse("conversation-export-json", args=[conversation.id]),
                     "Download Markdown": reverse("conversation-export-markdown", args=[conversation.id]),
                     "Read as a document": reverse("conversation-export-document", args=[conversation.id])}


# The document page ------------------------------------------------------------------------------------

def test_the_document_shows_dividers_summaries_and_archived_sections(client, alice, eager_simulator,
                                                                     django_capture_on_commit_callbacks):
    conversation, event, attachment, old = build(client, alice, django_capture_on_commit_callbacks, in_place=False)
    response = client.get(reverse("conversation-export-document", args=[conversation.id]))
    assert response.status_code == 200 and response["Content-Type"] == "text/html; charset=utf-8"
    page = parse_html(body(response))
    # Every script of the page is a file (the CSP refuses inline ones): none came from the transcript.
    assert all("src" in s.attrs for s in page.iter("script"))
    document = page.find("div", id="export-body")[0]
    assert document.find("h1")[0].text() == conversation.title
    dividers = document.find("section", data_role="summary")
    assert len(dividers) == 1
    assert dividers[0].text().strip().startswith(f"Compacted {event.messages_before:,} messages into")
    assert dividers[0].find("blockquote") and "Summary" in dividers[0].find("blockquote")[0].text()
    archived = section(document, "Archived originals: the ")
    assert archived.attrs == {"class": "export-archived", "data-kind": "compacted"}
    hostile = [a for a in archived.find("article", data_role="user") if "alert(1)" in a.text()]
    assert len(hostile) == 1 and "</details><script>alert(1)</script>" in hostile[0].text()
    links = [a.attrs["href"] for a in archived.iter("a") if a.text() == "photo.png"]
    assert links == [reverse("attachment-file", args=[attachment.id])]
    replaced = section(document, "Replaced reply")
    assert replaced.attrs["data-kind"] == "replaced" and len(replaced.find("article", data_role="assistant")) == 1
    # The divider and the live messages are outside every section; all messages are there.
    assert not any(a.tag == "details" for a in dividers[0].ancestors())
    shown = Message.objects.filter(conversation=conversation, visible=True, is_summary=False).count()
    assert len(document.find("article")) == shown
    assert page.find("a", id="export-markdown")[0].attrs["href"] == reverse("conversation-export-markdown",
                                                                             args=[conversation.id])


# Import -----------------------------------------------------------------------------------------------

def upload(client, data: bytes, name: str = "conversation.json", **extra):
    return client.post(reverse("conversation-import"),
                       {"file": SimpleUploadedFile(name, data, content_type="application/json")}, **extra)


def test_the_home_page_offers_the_import_form(signed_in):
    page = parse_html(signed_in.get(reverse("home")).content.decode())
    form = page.find("form", id="import-form")[0]
    assert form.attrs["action"] == reverse("conversation-import") and form.attrs["enctype"] == "multipart/form-data"
    field = form.find("input", type="file")[0]
    assert field.attrs["name"] == "file" and field.attrs["accept"].startswith(".json")
    label = form.find("label")[0]
    assert label.attrs["for"] == field.attrs["id"] and label.text() == "Conversation file (JSON)"
    assert field.attrs["aria-describedby"] == "import-help" and page.find("p", id="import-help")
    assert form.parent.tag == "details" and next(form.parent.iter("summary")).text() == "Import a conversation"
    assert form.find("input", name="csrfmiddlewaretoken")


def test_an_export_imported_is_a_new_conversation_of_the_uploader(client, alice, bob, conversation):
    client.force_login(alice)
    exported = body(client.get(reverse("conversation-export-json", args=[conversation.id]))).encode()
    client.force_login(bob)
    response = upload(client, exported)
    mine = Conversation.objects.get(owner=bob)
    assert response.status_code == 302 and response["Location"] == reverse("conversation", args=[mine.id])
    assert mine.id != conversation.id and mine.title == conversation.title
    assert list(mine.messages.order_by("id").values_list("role", "content")) == \
        list(conversation.messages.order_by("id").values_list("role", "content"))
    assert Conversation.objects.filter(owner=alice).count() == 1  # the original is untouched


def test_a_plain_openai_messages_array_is_imported(signed_in, alice):
    data = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]).encode()
    response = signed_in.post(reverse("conversation-import"),
                              {"file": SimpleUploadedFile("chat.json", data, content_type="application/json")},
                              follow=True)
    imported = Conversation.objects.get(owner=alice)
    assert response.redirect_chain[-1][0] == reverse("conversation", args=[imported.id])
    assert list(imported.messages.order_by("id").values_list("role", "content")) == [("user", "hi"),
                                                                                     ("assistant", "hello")]


@pytest.mark.parametrize("data, bad", [
    (json.dumps([{"role": "user", "content": "hi"}, {"role": "wizard", "content": "x"}]).encode(), "[1].role"),
    (b'{"format": "hermes-web/1", "conversation": ', "document"),
    (b"not json at all", "document"),
])
def test_a_refused_file_names_the_bad_field_and_writes_nothing(signed_in, alice, data, bad):
    before = (Conversation.objects.count(), Message.objects.count())
    response = upload(signed_in, data, follow=True)
    assert response.redirect_chain == [(reverse("home"), 302)]
    flash = [li.text() for ul in parse_html(response.content.decode()).find("ul", **{"class": "flash"})
             for li in ul.iter("li")]
    assert len(flash) == 1 and flash[0].startswith("Nothing was imported: ") and bad in flash[0]
    assert (Conversation.objects.count(), Message.objects.count()) == before


def test_a_form_without_a_file_is_refused(signed_in):
    response = signed_in.post(reverse("conversation-import"), {}, follow=True)
    assert "Nothing was imported: Choose a file to import." in response.content.decode()
    assert not Conversation.objects.exists()


@pytest.mark.parametrize("size, said", [(5_000, "the file is 4.9 KB"), (80_000, "the file is 78.")])
def test_a_file_over_the_limit_is_refused(signed_in, monkeypatch, size, said):
    """A body over the limit and the multipart envelope is refused from its length, before it is
    read; a smaller body whose file is over the limit, from the file's size."""
    import sessions.views_import as views

    monkeypatch.setattr(views, "MAX_IMPORT_BYTES", 1_000)
    response = upload(signed_in, b"[" + b" " * size + b"]", follow=True)
    text = response.content.decode()
    assert f"Nothing was imported: {said}" in text and "an import may be at most 1000 bytes." in text
    assert not Conversation.objects.exists()


def test_an_import_larger_than_a_form_post_may_be_reaches_the_view(signed_in, alice, settings):
    """An export runs to megabytes: the file is streamed to a temporary file and only the import's
    own limit applies, not the one for ordinary posts (DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    words = "lorem ipsum dolor sit amet " * 30_000  # 810,000 characters
    data = json.dumps([{"role": "user", "content": words}, {"role": "assistant", "content": words},
                       {"role": "user", "content": words}, {"role": "assistant", "content": words}]).encode()
    assert len(data) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    response = upload(signed_in, data)
    imported = Conversation.objects.get(owner=alice)
    assert response.status_code == 302 and response["Location"] == reverse("conversation", args=[imported.id])
    assert imported.messages.count() == 4


def test_the_import_needs_the_csrf_token(alice):
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    data = json.dumps([{"role": "user", "content": "hi"}]).encode()
    assert upload(client, data).status_code == 403
    assert not Conversation.objects.exists()
    token = client.get(reverse("home")).context["csrf_token"]
    response = client.post(reverse("conversation-import"), {
        "file": SimpleUploadedFile("chat.json", data, content_type="application/json"),
        "csrfmiddlewaretoken": str(token)})
    assert response.status_code == 302 and Conversation.objects.filter(owner=alice).count() == 1


def test_an_anonymous_upload_is_sent_to_log_in(client):
    response = upload(client, b"[]")
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert not Conversation.objects.exists()
