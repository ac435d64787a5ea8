"""Read-only share links on the Django test client: the owner creates and revokes them (owner
only, CSRF-protected), the token is unguessable and only its hash is stored, anyone with the link
reads the transcript (compaction dividers included) with noindex and no-referrer headers, a
revoked or expired link is the same 404 as an unknown one, the workspace files only when chosen
and only through the share URL (no way out of the folder), the attachments only of that
conversation through share URLs, nothing private on the page, and the staff dashboard and the
admin's view of the links."""
from __future__ import annotations

import hashlib
import io
import os
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from sessions.models import Attachment, Conversation, Session, ShareLink
from sessions.services import attachments as attachment_service
from sessions.services import share
from sessions.services.context import message_append, session_start
from tests.conftest import user
from tests.web.test_look import inline, policy_of

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NEW_URL = re.compile(r'id="share-new-url"[^>]*value="(http://testserver/share/([^/"]+)/)"')


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


def png(color="teal") -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, "PNG")
    return out.getvalue()


def attach(owner, conversation, message=None, name="cat.png") -> Attachment:
    """An image attachment of ``conversation``, sent with ``message`` (pending without one)."""
    row = attachment_service.attachment_store(user=owner, conversation_id=conversation.id,
                                              upload=SimpleUploadedFile(name, png(), content_type="image/png"))
    if message is not None:
        Attachment.objects.filter(id=row.id).update(message=message)
    return row


@pytest.fixture
def conversation(alice):
    """Alice's conversation: an exchange, a compaction divider, then a message with an image."""
    c = Conversation.objects.create(owner=alice, title="Gateway migration", provider="simulator",
                                    model="sim-claude-200k")
    first = session_start(conversation=c)
    message_append(session=first, role="user", content="How do we move the gateway?")
    message_append(session=first, role="assistant", content="Move it **behind** the blue balancer.")
    child = Session.objects.create(conversation=c, parent=first)
    Session.objects.filter(id=first.id).update(ended_at=timezone.now())
    summary = message_append(session=child, role="user", content="Summary: the gateway moves behind the balancer.",
                             is_summary=True)
    c.compression_events.create(session=first, new_session=child, summary_message=summary, trigger="manual",
                                status="compressed", messages_before=12, messages_after=3)
    photo = message_append(session=child, role="user", content=[
        {"type": "text", "text": "Here is the diagram.\n\n[attached image: cat.png (1 KB)]"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="},
         "_image": {"width": 64, "height": 48, "name": "cat.png"}}])
    attach(alice, c, photo)
    return c


@pytest.fixture
def owner(client, alice):
    client.force_login(alice)
    return client


def create(client, conversation, expires="7d", workspace=False, **extra) -> str:
    """Create a link as the panel does (htmx) and return its token, read off the answer."""
    data = {"expires": expires, **({"include_workspace": "1"} if workspace else {})}
    response = client.post(reverse("share-create", args=[conversation.id]), data, **HTMX, **extra)
    assert response.status_code == 200, response.content
    match = NEW_URL.search(response.content.decode())
    assert match, response.content.decode()
    return match.group(2)


def page(token: str) -> str:
    return f"/share/{token}/"


# Creating and revoking ------------------------------------------------------------------------

def test_it_creates_an_unguessable_link_and_stores_only_its_hash(owner, conversation):
    before = timezone.now()
    token = create(owner, conversation)
    assert len(token) == 43 and re.fullmatch(r"[A-Za-z0-9_-]{43}", token)  # 32 random bytes
    link = ShareLink.objects.get()
    assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
    row = ShareLink.objects.filter(id=link.id).values().get()
    assert not any(token in str(value) for value in row.values())
    assert link.created_by.username == "alice" and not link.include_workspace and link.revoked_at is None
    assert timedelta(days=7) <= link.expires_at - before < timedelta(days=7, minutes=1)
    assert create(owner, conversation) != token  # each link its own token


def test_the_token_is_shown_once_and_the_list_does_not_show_it_again(owner, conversation):
    token = create(owner, conversation)
    listed = owner.get(reverse("share-links", args=[conversation.id]), **HTMX).content.decode()
    assert token not in listed and 'id="share-link-' in listed and "Revoke" in listed


@pytest.mark.parametrize("expires,lifetime", [("never", None), ("1d", timedelta(days=1)), ("30d", timedelta(days=30))])
def test_each_expiry_choice_is_honoured(owner, conversation, expires, lifetime):
    create(owner, conversation, expires=expires)
    link = ShareLink.objects.get()
    if lifetime is None:
        assert link.expires_at is None
    else:
        assert lifetime <= link.expires_at - link.created_at < lifetime + timedelta(seconds=5)


def test_an_unknown_expiry_is_refused_and_nothing_is_created(owner, conversation):
    response = owner.post(reverse("share-create", args=[conversation.id]), {"expires": "365d"}, **HTMX)
    assert response.status_code == 422 and "expires" in response.content.decode()
    assert not ShareLink.objects.exists()


def test_without_javascript_the_new_link_is_shown_on_a_page_of_its_own(owner, conversation):
    response = owner.post(reverse("share-create", args=[conversation.id]), {"expires": "never"})
    html = response.content.decode()
    assert response.status_code == 200 and "Copy the link now" in html and NEW_URL.search(html)
    assert f'href="/conversations/{conversation.id}/"' in html  # back to the conversation


def test_the_conversation_page_carries_the_panel(owner, conversation):
    html = owner.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert 'id="share-create"' in html and 'name="include_workspace"' in html
    assert f'hx-get="/conversations/{conversation.id}/share/links"' in html
    assert "js/share.js" in html and inline(html) == []
    panel = owner.post(reverse("share-create", args=[conversation.id]), {"expires": "never"}, **HTMX)
    assert inline(panel.content.decode()) == []


def test_only_the_owner_lists_creates_and_revokes(client, owner, conversation, bob):
    token = create(owner, conversation)
    link = ShareLink.objects.get()
    intruder = Client()
    intruder.force_login(bob)
    assert intruder.get(reverse("share-links", args=[conversation.id]), **HTMX).status_code == 404
    assert intruder.post(reverse("share-create", args=[conversation.id]), {"expires": "never"}, **HTMX).status_code == 404
    assert intruder.post(reverse("share-revoke", args=[conversation.id, link.id]), **HTMX).status_code == 404
    bobs = Conversation.objects.create(owner=bob, title="Bob's")
    assert intruder.post(reverse("share-revoke", args=[bobs.id, link.id]), **HTMX).status_code == 404
    assert ShareLink.objects.count() == 1 and ShareLink.objects.get().revoked_at is None
    assert Client().get(page(token)).status_code == 200
    anonymous = Client().post(reverse("share-create", args=[conversation.id]), {"expires": "never"})
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    assert ShareLink.objects.count() == 1


def test_create_and_revoke_need_the_csrf_token(alice, conversation):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    assert strict.post(reverse("share-create", args=[conversation.id]), {"expires": "never"}).status_code == 403
    assert not ShareLink.objects.exists()
    link, _ = share.share_link_create(user=alice, conversation_id=conversation.id)
    assert strict.post(reverse("share-revoke", args=[conversation.id, link.id])).status_code == 403
    assert ShareLink.objects.get().revoked_at is None
    assert strict.get(reverse("share-create", args=[conversation.id])).status_code == 405  # never on GET


def test_a_revoked_link_answers_the_same_404_as_an_unknown_one(owner, conversation):
    token = create(owner, conversation)
    link = ShareLink.objects.get()
    response = owner.post(reverse("share-revoke", args=[conversation.id, link.id]), **HTMX)
    assert response.status_code == 200 and 'id="share-none"' in response.content.decode()
    visitor = Client()
    revoked, unknown = visitor.get(page(token)), visitor.get(page("A" * 43))
    assert revoked.status_code == unknown.status_code == 404
    assert revoked.templates[0].name == unknown.templates[0].name == "404.html"
    assert "Gateway migration" not in revoked.content.decode()
    photo = Attachment.objects.get()
    assert visitor.get(f"/share/{token}/attachments/{photo.id}").status_code == 404


def test_an_expired_link_answers_404(owner, conversation):
    token = create(owner, conversation, expires="1d")
    link = ShareLink.objects.get()
    assert share.share_link_get(token=token, now=link.expires_at - timedelta(seconds=1)) == link
    assert share.share_link_get(token=token, now=link.expires_at + timedelta(seconds=1)) is None
    ShareLink.objects.filter(id=link.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get(page(token)).status_code == 404
    listed = owner.get(reverse("share-links", args=[conversation.id]), **HTMX).content.decode()
    assert 'id="share-none"' in listed  # no longer among the active links


def test_the_stored_hash_does_not_open_the_link(owner, conversation):
    create(owner, conversation)
    stored = ShareLink.objects.get().token_hash
    assert Client().get(page(stored)).status_code == 404
    assert Client().get(page(stored[:43])).status_code == 404


def test_a_deactivated_owners_links_stop_answering(owner, alice, conversation):
    token = create(owner, conversation)
    alice.is_active = False
    alice.save(update_fields=["is_active"])
    assert Client().get(page(token)).status_code == 404


# The public page ------------------------------------------------------------------------------

def test_an_anonymous_visitor_reads_the_transcript_with_its_compaction_divider(owner, conversation):
    token = create(owner, conversation)
    response = Client().get(page(token))
    html = response.content.decode()
    assert response.status_code == 200
    assert '<meta name="robots" content="noindex, nofollow">' in html
    assert response["X-Robots-Tag"] == "noindex, nofollow"
    assert response["Referrer-Policy"] == "no-referrer"
    assert "no-store" in response["Cache-Control"]
    assert "Gateway migration" in html and "How do we move the gateway?" in html
    assert "<strong>behind</strong>" in html  # the reply's markdown, rendered
    assert 'data-role="summary"' in html and "Context compacted" in html and "12 → 3 messages" in html
    assert "Here is the diagram." in html and "[attached image" not in html
    assert inline(html) == [] and policy_of(response)["script-src"] == "'self'"
    assert "unsafe-inline" not in response["Content-Security-Policy"]


def test_the_page_holds_nothing_private_nor_anything_that_acts(owner, alice, conversation):
    other = Conversation.objects.create(owner=alice, title="Payroll secrets", provider="simulator")
    message_append(session=session_start(conversation=other), role="user", content="salaries")
    other_photo = attach(alice, other)
    token = create(owner, conversation)
    for visitor in (Client(), owner):  # an anonymous visitor, and the owner herself
        response = visitor.get(page(token))
        html = response.content.decode()
        assert response.status_code == 200
        hrefs = re.findall(r'(?:href|src)="([^"]+)"', html)
        assert hrefs and all(h.startswith((f"/share/{token}/", "/static/", "#")) for h in hrefs), hrefs
        html = html.replace(token, "")  # random letters: they might spell anything
        for absent in ("Payroll secrets", "salaries", "csrfmiddlewaretoken", "X-CSRFToken", "ws-connect", "/ws/",
                       "composer", "<form", "<script", "hx-", "/admin", "/staff", "/conversations/", "/accounts/",
                       "alice", "sim-claude", "simulator", "Regenerate", "Retry", "Edit", "View the archived originals"):
            assert absent not in html, absent
        assert not response.cookies.get("csrftoken") and not response.cookies.get("sessionid")
    assert Client().get(f"/share/{token}/attachments/{other_photo.id}").status_code == 404


def test_attachments_are_served_through_the_share_url_only_of_that_conversation(owner, alice, conversation):
    token = create(owner, conversation)
    photo = Attachment.objects.get(conversation=conversation)
    html = Client().get(page(token)).content.decode()
    assert f'src="/share/{token}/attachments/{photo.id}/thumbnail"' in html
    assert f'href="/share/{token}/attachments/{photo.id}"' in html
    assert f'"/attachments/{photo.id}' not in html  # never the owner's own URL
    served = Client().get(f"/share/{token}/attachments/{photo.id}")
    assert served.status_code == 200 and served["Content-Type"] == "image/png"
    assert b"".join(served.streaming_content) == png()
    assert served["X-Content-Type-Options"] == "nosniff" and served["X-Robots-Tag"] == "noindex, nofollow"
    assert Client().get(f"/share/{token}/attachments/{photo.id}/thumbnail").status_code == 200
    pending = attach(alice, conversation, name="draft.png")  # in the composer, never sent
    assert Client().get(f"/share/{token}/attachments/{pending.id}").status_code == 404
    assert Client().get(f"/attachments/{photo.id}").status_code == 302  # the owner's URL still needs her login


# The workspace --------------------------------------------------------------------------------

def workspace_with_files(conversation, tmp_path):
    root = conversation.workspace
    (root / "src").mkdir(parents=True)
    (root / "notes.md").write_text("# Plan\nmove the gateway\n")
    (root / "src" / "main.py").write_text("print('hello')\n")
    (tmp_path / "outside.txt").write_text("the owner's private file\n")
    (tmp_path / "outside-dir").mkdir()
    (tmp_path / "outside-dir" / "key.txt").write_text("private key\n")
    os.symlink(tmp_path / "outside.txt", root / "link.txt")
    os.symlink(tmp_path / "outside-dir", root / "linked-dir")
    return root


def test_workspace_files_are_hidden_unless_the_owner_included_them(owner, conversation, tmp_path):
    workspace_with_files(conversation, tmp_path)
    token = create(owner, conversation)
    html = Client().get(page(token)).content.decode()
    assert "share-workspace" not in html and "notes.md" not in html
    assert Client().get(f"/share/{token}/files/notes.md").status_code == 404


def test_included_workspace_files_are_listed_and_downloaded_through_the_share_url(owner, conversation, tmp_path):
    workspace_with_files(conversation, tmp_path)
    token = create(owner, conversation, workspace=True)
    assert ShareLink.objects.get().include_workspace
    html = Client().get(page(token)).content.decode()
    assert f'href="/share/{token}/files/notes.md"' in html and f'href="/share/{token}/files/src/main.py"' in html
    assert "link.txt" not in html and "linked-dir" not in html and "key.txt" not in html  # symlinks left out
    response = Client().get(f"/share/{token}/files/src/main.py")
    assert response.status_code == 200 and b"".join(response.streaming_content) == b"print('hello')\n"
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff" and response["Referrer-Policy"] == "no-referrer"
    other = create(owner, conversation)  # a link without the workspace, to the same conversation
    assert Client().get(f"/share/{other}/files/notes.md").status_code == 404


@pytest.mark.parametrize("name", [
    "../outside.txt", "..%2Foutside.txt", "%2e%2e/outside.txt", "src/../../outside.txt", "src/%2e%2e/%2e%2e/outside.txt",
    "%2Fetc%2Fpasswd", "/etc/passwd", "link.txt", "linked-dir/key.txt", "src", "./notes.md", "src//main.py",
    "..\\outside.txt", "notes.md%00.txt", "missing.txt",
])
def test_the_share_file_url_never_leaves_the_workspace(owner, conversation, tmp_path, name):
    workspace_with_files(conversation, tmp_path)
    token = create(owner, conversation, workspace=True)
    response = Client().get(f"/share/{token}/files/{name}")
    assert response.status_code == 404
    content = b"".join(response.streaming_content) if response.streaming else response.content
    assert b"private" not in content and b"root:" not in content


def test_a_conversation_without_a_workspace_folder_shows_it_empty_and_creates_nothing(owner, conversation):
    token = create(owner, conversation, workspace=True)
    html = Client().get(page(token)).content.decode()
    assert "The workspace is empty." in html
    assert not conversation.workspace.exists()


# Staff -----------------------------------------------------------------------------------------

@pytest.fixture
def carol(django_user_model):
    """Staff allowed to view conversations (what the dashboard needs)."""
    u = user(django_user_model, "carol", "carol-password-1", is_staff=True)
    u.user_permissions.add(Permission.objects.get(codename="view_conversation", content_type__app_label="agent_sessions"))
    return u


def test_the_dashboard_lists_the_active_links_only_to_staff(owner, alice, bob, carol, conversation):
    create(owner, conversation, workspace=True)
    revoked, _ = share.share_link_create(user=alice, conversation_id=conversation.id)
    share.share_link_revoke(user=alice, conversation_id=conversation.id, link_id=revoked.id)
    other = Conversation.objects.create(owner=alice, title="Expired plans")
    expired, _ = share.share_link_create(user=alice, conversation_id=other.id, expires="1d")
    ShareLink.objects.filter(id=expired.id).update(expires_at=timezone.now() - timedelta(minutes=1))
    staff = Client()
    staff.force_login(carol)
    response = staff.get("/staff/")
    assert response.status_code == 200
    assert [s.id for s in response.context["share_links"]] == [ShareLink.objects.get(include_workspace=True).id]
    section = response.content.decode().split('id="share-links"')[1].split("</section>")[0]
    assert "Gateway migration" in section and "alice" in section and "included" in section
    assert "Expired plans" not in section
    nobody = Client()
    nobody.force_login(bob)
    assert nobody.get("/staff/").status_code == 404
    assert Client().get("/staff/").status_code == 302


def test_staff_revoke_links_in_the_admin(owner, conversation, django_user_model):
    token = create(owner, conversation)
    link = ShareLink.objects.get()
    root = django_user_model.objects.create_superuser("root", password="root-password-1")
    admin = Client()
    admin.force_login(root)
    changelist = reverse("admin:agent_sessions_sharelink_changelist")
    assert admin.get(changelist).status_code == 200
    assert admin.get(reverse("admin:agent_sessions_sharelink_add")).status_code == 403
    response = admin.post(changelist, {"action": "revoke", "_selected_action": [link.id]}, follow=True)
    assert response.status_code == 200 and "Revoked 1 share link" in response.content.decode()
    assert ShareLink.objects.get().revoked_at is not None
    assert Client().get(page(token)).status_code == 404
