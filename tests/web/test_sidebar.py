"""The conversation sidebar on the Django test client: the list (newest first, empty ones left out
but the open one), rename (own only, refused titles keep the old one, the manual mark, the live
push, CSRF), delete (everything of it and its workspace folder, nothing of anyone else's, refused
while work runs, never on GET), search over titles and message text (archived ones marked, only
the user's own), and the reuse of an empty conversation by `/new` and the New conversation button."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from compression import settings_store
from sessions.models import (
    ApiCall,
    CompressionEvent,
    Conversation,
    ConversationLock,
    Message,
    Session,
    Turn,
)
from sessions.presenters import gauge
from sessions.services.context import message_append, session_active, session_start
from sessions.services.recall import search_owner
from sessions.services.routes import conversation_model_switch
from sessions.services.runtime import current_config
from tests.web.pushes import Page

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def page_of(conversation) -> dict:
    """The headers of an htmx request sent from the conversation's page."""
    return {**HTMX, "HTTP_HX_CURRENT_URL": f"http://testserver/conversations/{conversation.id}/"}


def chat(owner, title: str = "New conversation", *texts: str, model: str = "sim-claude-64k") -> Conversation:
    c = Conversation.objects.create(owner=owner, title=title, provider="simulator", model=model)
    session = session_start(conversation=c)
    for i, text in enumerate(texts):
        message_append(session=session, role="user" if i % 2 == 0 else "assistant", content=text)
    return c


# The list --------------------------------------------------------------------------------------

def test_the_sidebar_lists_the_users_conversations_newest_first_with_model_and_pressure(client, alice, bob):
    older = chat(alice, "Older plan", "first question", "first answer")
    newer = chat(alice, "Newer plan", "second question", "second answer")
    Conversation.objects.filter(pk=older.pk).update(last_activity_at=timezone.now() - timedelta(hours=2))
    session = session_active(newer)
    session.last_prompt_tokens = 52_000  # sim-claude-64k: past its threshold (50,918), below 85 %
    session.save()
    chat(bob, "Bob's secret", "bob asks", "bob is answered")
    client.force_login(alice)
    body = client.get(reverse("conversation", args=[older.id])).content.decode()
    sidebar = body.split('id="sidebar-wrap"')[1].split("</nav>")[0]
    assert sidebar.index("Newer plan") < sidebar.index("Older plan")
    assert "Bob" not in sidebar
    assert sidebar.count('aria-current="page"') == 1
    current = sidebar.split(f'id="sidebar-row-{older.id}"')[1].split("</li>")[0]
    assert 'aria-current="page"' in current
    newer_row = sidebar.split(f'id="sidebar-row-{newer.id}"')[1].split("</li>")[0]
    assert "Simulator Claude 64K" in newer_row
    assert "81% · high" in newer_row and 'data-level="high"' in newer_row
    # Never sent to the model yet: the row shows the projected first request (system prompt, tool
    # schemas and the stored messages), to the token what the conversation's gauge shows.
    g = gauge(older)
    assert g["basis"] == "counted" and 0 < g["tokens"] < 0.02 * g["window"]
    assert f'{round(100 * g["tokens"] / g["window"])}% · low' in current


def test_empty_conversations_are_listed_nowhere_but_the_open_one_is(client, alice):
    full = chat(alice, "Has messages", "a question", "an answer")
    empty = chat(alice, "Empty one")
    switched = chat(alice, "Only switched")  # a model switch line is no content
    conversation_model_switch(conversation=switched, cfg=current_config(), provider="simulator",
                              model="sim-claude-200k")
    client.force_login(alice)
    home = client.get(reverse("home")).content.decode()
    assert "Has messages" in home and "Empty one" not in home and "Only switched" not in home
    page = client.get(reverse("conversation", args=[full.id])).content.decode()
    sidebar = page.split('id="sidebar-wrap"')[1]
    assert "Empty one" not in sidebar and "Only switched" not in sidebar
    page = client.get(reverse("conversation", args=[empty.id])).content.decode()
    sidebar = page.split('id="sidebar-wrap"')[1]
    assert f'id="sidebar-row-{empty.id}"' in sidebar and "Has messages" in sidebar
    assert "Only switched" not in sidebar


def test_the_sidebar_has_no_inline_script_style_or_handlers(client, alice):
    c = chat(alice, "Plain", "hello", "hi")
    client.force_login(alice)
    body = client.get(reverse("conversation", args=[c.id])).content.decode()
    sidebar = body.split('id="sidebar-wrap"')[1].split("</nav>")[0]
    assert "style=" not in sidebar and "<script" not in sidebar and " on" + "click" not in sidebar
    assert "hx-on" not in sidebar
    assert 'aria-controls="sidebar"' in body and 'aria-expanded=' in body
    assert '<label for="sidebar-q">' in sidebar


# Rename ----------------------------------------------------------------------------------------

def test_a_rename_saves_a_manual_title_and_answers_with_the_row(client, alice):
    c = chat(alice, "Old title", "hello", "hi")
    client.force_login(alice)
    response = client.post(reverse("conversation-rename", args=[c.id]), {"title": "  Deploy <b>plan</b>\n v2 "},
                           **page_of(c))
    assert response.status_code == 200
    c.refresh_from_db()
    assert (c.title, c.title_manual) == ("Deploy <b>plan</b> v2", True)
    body = response.content.decode()
    assert f'id="sidebar-row-{c.id}"' in body and "Deploy &lt;b&gt;plan&lt;/b&gt; v2" in body
    assert 'aria-current="page"' in body
    assert json.loads(response["HX-Trigger"]) == {"titleChanged": {"id": str(c.id), "title": "Deploy <b>plan</b> v2"}}


def test_a_rename_is_pushed_to_every_page_open_on_the_conversation(client, alice, django_capture_on_commit_callbacks):
    c = chat(alice, "Old title", "hello", "hi")
    page = Page(c)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("conversation-rename", args=[c.id]), {"title": "Fresh & new"}, **HTMX)
    html = "".join(e["html"] for e in page.received())
    assert 'hx-swap-oob="innerHTML:#conversation-title">Fresh &amp; new</span>' in html
    assert f'hx-swap-oob="innerHTML:#sidebar-title-{c.id}">Fresh &amp; new</span>' in html


def test_an_empty_or_overlong_title_is_refused_and_the_old_one_kept(client, alice):
    c = chat(alice, "Keep me", "hello", "hi")
    client.force_login(alice)
    url = reverse("conversation-rename", args=[c.id])
    response = client.post(url, {"title": "   \n "}, **HTMX)
    assert response.status_code == 422
    body = response.content.decode()
    assert "A title cannot be empty; the old title is kept." in body
    assert 'class="rename-input"' in body and 'aria-invalid="true"' in body
    response = client.post(url, {"title": "x" * 121}, **HTMX)
    assert response.status_code == 422
    assert "at most 120 characters (this one has 121)" in response.content.decode()
    # Without htmx the page says so; from the heading's editor the error goes beside it.
    page = client.post(url, {"title": ""})
    assert page.status_code == 422 and "cannot be empty" in page.content.decode()
    heading = client.post(url, {"title": "", "place": "heading"}, **HTMX)
    assert heading.status_code == 422 and heading["HX-Retarget"] == "#title-rename-error"
    c.refresh_from_db()
    assert (c.title, c.title_manual) == ("Keep me", False)


def test_a_rename_from_the_heading_swaps_nothing_and_says_the_new_title(client, alice):
    c = chat(alice, "Old", "hello", "hi")
    client.force_login(alice)
    response = client.post(reverse("conversation-rename", args=[c.id]), {"title": "New", "place": "heading"},
                           **page_of(c))
    assert response.status_code == 200 and response["HX-Reswap"] == "none"
    assert json.loads(response["HX-Trigger"])["titleChanged"]["title"] == "New"


def test_rename_without_javascript_is_a_page_then_back_where_you_were(client, alice):
    c = chat(alice, "Old", "hello", "hi")
    other = chat(alice, "Other", "q", "a")
    client.force_login(alice)
    url = reverse("conversation-rename", args=[c.id])
    form = client.get(url, {"next": f"/conversations/{other.id}/"}).content.decode()
    assert 'name="title" value="Old"' in form and f'value="/conversations/{other.id}/"' in form
    response = client.post(url, {"title": "Renamed", "next": f"/conversations/{other.id}/"})
    assert response.status_code == 302 and response["Location"] == f"/conversations/{other.id}/"
    unsafe = client.post(url, {"title": "Again", "next": "https://evil.example/"})
    assert unsafe["Location"] == f"/conversations/{c.id}/"


def test_another_users_conversation_cannot_be_renamed(client, alice, bob):
    c = chat(alice, "Alice's", "hello", "hi")
    client.force_login(bob)
    url = reverse("conversation-rename", args=[c.id])
    assert client.get(url, **HTMX).status_code == 404
    assert client.post(url, {"title": "mine now"}, **HTMX).status_code == 404
    assert client.get(reverse("sidebar-row", args=[c.id]), **HTMX).status_code == 404
    c.refresh_from_db()
    assert (c.title, c.title_manual) == ("Alice's", False)


def test_rename_and_delete_enforce_csrf(alice):
    c = chat(alice, "Guarded", "hello", "hi")
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(reverse("conversation-rename", args=[c.id]), {"title": "x"}, **HTMX).status_code == 403
    assert csrf_client.post(reverse("conversation-delete", args=[c.id]), **HTMX).status_code == 403
    c.refresh_from_db()
    assert c.title == "Guarded"
    # With the token the page carries, the same request goes through.
    csrf_client.get(reverse("conversation", args=[c.id]))
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(reverse("conversation-rename", args=[c.id]), {"title": "x"},
                                HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200


# Delete ----------------------------------------------------------------------------------------

def busy_conversation(owner) -> Conversation:
    c = chat(owner, "Doomed", "hello", "hi", "more", "and more")
    session = session_active(c)
    child = Session.objects.create(conversation=c, parent=session)
    CompressionEvent.objects.create(conversation=c, session=session, new_session=child, trigger="manual",
                                    status="compressed")
    ApiCall.objects.create(conversation=c, session=session, provider="simulator", model=c.model, prompt_tokens=10)
    Turn.objects.create(conversation=c, text="hello", status="done")
    ConversationLock.objects.create(conversation=c, kind="turn", holder="gone", expires_at=timezone.now())
    c.workspace.mkdir(parents=True, exist_ok=True)
    (c.workspace / "notes.txt").write_text("private notes\n")
    (c.workspace / "sub").mkdir()
    (c.workspace / "sub" / "more.txt").write_text("x")
    return c


def test_delete_asks_first_and_never_deletes_on_get(client, alice):
    c = chat(alice, "Careful", "hello", "hi")
    client.force_login(alice)
    url = reverse("conversation-delete", args=[c.id])
    page = client.get(url).content.decode()
    assert "Delete “Careful”?" in page and "cannot be undone" in page and 'method="post"' in page
    fragment = client.get(url, **HTMX).content.decode()
    assert 'class="delete-confirm"' in fragment and "2 messages" in fragment and "Keep it" in fragment
    assert Conversation.objects.filter(pk=c.pk).exists()


def test_delete_removes_everything_of_it_and_nothing_of_anyone_else(client, alice, bob,
                                                                     django_capture_on_commit_callbacks):
    doomed = busy_conversation(alice)
    kept_mine = busy_conversation(alice)
    ConversationLock.objects.filter(conversation=kept_mine).delete()
    theirs = busy_conversation(bob)
    workspace = doomed.workspace
    before = {model: model.objects.exclude(conversation=doomed).count()
              for model in (Session, Message, Turn, CompressionEvent, ApiCall, ConversationLock)}
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("conversation-delete", args=[doomed.id]), **page_of(kept_mine))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="sidebar-status"' in body and "Deleted “Doomed” and everything in it." in body
    assert not Conversation.objects.filter(pk=doomed.pk).exists()
    for model, count in before.items():
        assert not model.objects.filter(conversation_id=doomed.id).exists(), model
        assert model.objects.count() == count, model
    assert not workspace.exists()
    assert (theirs.workspace / "notes.txt").read_text() == "private notes\n"
    assert (kept_mine.workspace / "sub" / "more.txt").exists()
    assert {h.conversation_id for h in search_owner(owner_id=alice.pk, query="hello")} == {kept_mine.id}


def test_deleting_the_open_conversation_lands_on_the_home_page_with_a_message(client, alice,
                                                                             django_capture_on_commit_callbacks):
    c = chat(alice, "Open one", "hello", "hi")
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("conversation-delete", args=[c.id]), **page_of(c))
    assert response["HX-Redirect"] == reverse("home")
    home = client.get(reverse("home")).content.decode()
    assert "Deleted “Open one” and everything in it." in home
    # Without JavaScript: the confirmation page's form, then the home page.
    other = chat(alice, "Second", "hello", "hi")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("conversation-delete", args=[other.id]),
                               {"next": f"/conversations/{other.id}/"})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    assert not Conversation.objects.filter(pk=other.pk).exists()


def test_another_users_conversation_cannot_be_deleted(client, alice, bob):
    c = busy_conversation(alice)
    ConversationLock.objects.all().delete()
    client.force_login(bob)
    url = reverse("conversation-delete", args=[c.id])
    assert client.get(url).status_code == 404
    assert client.post(url, **HTMX).status_code == 404
    assert client.post(url).status_code == 404
    assert Conversation.objects.filter(pk=c.pk).exists() and (c.workspace / "notes.txt").exists()
    assert Message.objects.filter(conversation=c).count() == 4


@pytest.mark.parametrize("busy", ["running turn", "waiting turn", "turn lease", "compression", "compression lease"])
def test_delete_is_refused_while_a_turn_or_a_compression_runs(client, alice, busy, django_capture_on_commit_callbacks):
    c = busy_conversation(alice)
    ConversationLock.objects.all().delete()
    session = session_active(c)
    later = timezone.now() + timedelta(seconds=30)
    if busy == "running turn":
        Turn.objects.create(conversation=c, text="working", status="running")
    elif busy == "waiting turn":
        Turn.objects.create(conversation=c, text="waiting", status="queued")
    elif busy == "turn lease":
        ConversationLock.objects.create(conversation=c, kind="turn", holder="a-worker", expires_at=later)
    elif busy == "compression":
        CompressionEvent.objects.create(conversation=c, session=session, trigger="manual", status="running")
    else:
        ConversationLock.objects.create(conversation=c, kind="compression", holder="a-worker", expires_at=later)
    counts = {model: model.objects.filter(conversation=c).count() for model in (Message, Turn, CompressionEvent)}
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("conversation-delete", args=[c.id]), **page_of(c))
        page = client.post(reverse("conversation-delete", args=[c.id]))
    assert response.status_code == 422 and response["HX-Retarget"] == f"#sidebar-confirm-{c.id}"
    expected = "Stop the running turn first" if "turn" in busy else "Wait for the compression to finish first"
    assert expected in response.content.decode() and expected in page.content.decode()
    assert page.status_code == 409
    assert Conversation.objects.filter(pk=c.pk).exists() and (c.workspace / "notes.txt").exists()
    assert counts == {model: model.objects.filter(conversation=c).count() for model in counts}


# Search ----------------------------------------------------------------------------------------

def search(client, q: str):
    return client.get(reverse("sidebar-search"), {"q": q}, **HTMX).content.decode()


def test_search_finds_titles_and_message_text_of_the_users_own_conversations_only(client, alice, bob):
    plan = chat(alice, "Lisbon offsite plan", "Which hotel?", "The one near the river.")
    budget = chat(alice, "Money", "The offsite budget is 42,500 EUR & more for <three> days.", "Noted.")
    chat(bob, "Bob's Lisbon trip", "Bob's offsite budget is secret", "ok")
    client.force_login(alice)
    body = search(client, "lisbon")
    assert f'href="/conversations/{plan.id}/"' in body and "<mark>Lisbon</mark> offsite plan" in body
    assert "Bob" not in body
    body = search(client, "offsite budget")
    message = Message.objects.get(conversation=budget, role="user")
    assert f'/conversations/{budget.id}/messages/{message.id}/?q=offsite%20budget#msg-{message.id}' in body
    assert "<mark>offsite</mark> <mark>budget</mark>" in body and "EUR &amp; more" in body
    assert "<three>" not in body  # escaped (SQLite's snippet) or dropped as markup (PostgreSQL's headline)
    assert '<span class="hit-title">Money</span>' in body
    assert "secret" not in body and "Bob" not in body
    assert "0 titles and 1 message match “offsite budget”." in body
    # The link opens the message in context.
    opened = client.get(f"/conversations/{budget.id}/messages/{message.id}/?q=offsite+budget")
    assert opened.status_code == 200 and "<mark>budget</mark>" in opened.content.decode()


def test_search_covers_archived_messages_and_says_so(client, alice):
    c = chat(alice, "Gateway")
    session = session_active(c)
    compacted = message_append(session=session, role="user", content="The staging gateway listens on port 8443.")
    message_append(session=session, role="assistant", content="Understood.")
    Message.objects.filter(pk=compacted.pk).update(archived=True)
    old = Session.objects.create(conversation=c)
    ended = message_append(session=old, role="assistant", content="The gateway certificate expires in March.")
    Session.objects.filter(pk=old.pk).update(ended_at=timezone.now())
    replaced = message_append(session=session, role="assistant", content="A gateway reply that was regenerated.")
    Message.objects.filter(pk=replaced.pk).update(archived=True, replaced=True)
    live = message_append(session=session, role="assistant", content="The gateway is up again.")
    client.force_login(alice)
    body = search(client, "gateway")
    rows = {int(part.split('"')[0]): part.split("</li>")[0] for part in body.split('data-ref="m')[1:]}
    assert set(rows) == {compacted.id, ended.id, replaced.id, live.id}
    assert "archived: compacted" in rows[compacted.id] and "archived: compacted" in rows[ended.id]
    assert "archived: replaced" in rows[replaced.id]
    assert "archived" not in rows[live.id]


def test_an_empty_query_shows_the_usual_list_and_no_hit_says_so(client, alice):
    c = chat(alice, "Listed", "hello", "hi")
    client.force_login(alice)
    body = client.get(reverse("sidebar-search"), {"q": "  "}, **page_of(c)).content.decode()
    assert 'id="sidebar-list"' in body and f'id="sidebar-row-{c.id}"' in body and 'aria-current="page"' in body
    none = search(client, "zebra")
    assert "Nothing in your conversations matches “zebra”." in none
    # Said once on screen: the status line (for screen readers) is visually hidden.
    assert '<span class="sr-only">Nothing matches “zebra”.</span>' in none
    assert none.count("matches “zebra”") == 2
    page = client.get(reverse("sidebar-search"), {"q": "hello"})
    assert page.status_code == 200 and "Search your conversations" in page.content.decode()


# A new conversation reuses an empty one --------------------------------------------------------

def test_new_from_an_empty_conversation_reuses_it(client, alice):
    c = chat(alice)
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[c.id]), {"text": "/new"}, **HTMX)
    assert response.status_code == 200 and "still empty" in response.content.decode()
    assert Conversation.objects.filter(owner=alice).count() == 1


def test_new_from_a_conversation_with_messages_starts_another_then_reuses_that(client, alice):
    full = chat(alice, "Full", "hello", "hi")
    client.force_login(alice)
    first = client.post(reverse("conversation-send", args=[full.id]), {"text": "/new"}, **HTMX)
    fresh = Conversation.objects.filter(owner=alice).exclude(pk=full.pk).get()
    assert first["HX-Redirect"] == reverse("conversation", args=[fresh.id])
    again = client.post(reverse("conversation-send", args=[full.id]), {"text": "/new"}, **HTMX)
    assert again["HX-Redirect"] == reverse("conversation", args=[fresh.id])
    assert Conversation.objects.filter(owner=alice).count() == 2


def test_the_new_conversation_button_reuses_the_newest_empty_one_on_the_chosen_model(client, alice, bob):
    settings_store.save_group("model", {"provider": "simulator", "model": "sim-claude-200k"})
    chat(alice, "Full", "hello", "hi")
    empty = chat(alice, model="sim-claude-64k")
    Conversation.objects.filter(pk=empty.pk).update(last_activity_at=timezone.now() - timedelta(days=1))
    bobs_empty = chat(bob)
    client.force_login(alice)
    response = client.post(reverse("conversation-create"), {"model": "simulator:sim-claude-200k"})
    assert response["Location"] == reverse("conversation", args=[empty.id])
    empty.refresh_from_db()
    assert (empty.provider, empty.model) == ("simulator", "sim-claude-200k")
    assert empty.last_activity_at > timezone.now() - timedelta(minutes=1)
    assert Conversation.objects.filter(owner=alice).count() == 2
    assert Conversation.objects.get(pk=bobs_empty.pk).owner == bob
    # Once it has a message it is no longer reused.
    message_append(session=session_active(empty), role="user", content="now it has something")
    client.post(reverse("conversation-create"))
    assert Conversation.objects.filter(owner=alice).count() == 3
