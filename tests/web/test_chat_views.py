"""The chat's markup on the fast tier: markdown rendered and sanitised (hostile input inert),
user text escaped with its line breaks, no inline script on the page, the event feed marking an
ineffective compaction, the double-click guard saying what it is, and the reply to a send when
the task queue is unreachable."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from sessions import fragments
from sessions.markdown import render_markdown
from sessions.models import CompressionEvent, Conversation, Turn
from sessions.services import turns as turns_service
from sessions.services.context import message_append, session_active, session_start

HTMX = {"HTTP_HX_REQUEST": "true"}


def parsed(html: str) -> list[tuple[str, dict]]:
    """Every start tag of `html` with its attributes, as a browser's parser reads them."""
    tags: list[tuple[str, dict]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append((tag, {k: v or "" for k, v in attrs}))

    Collect().feed(html)
    return tags


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


@pytest.mark.parametrize("hostile", [
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](jav&#x61;script:alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "![x](javascript:alert(1))",
    '<a href="javascript:alert(1)">x</a>',
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<iframe src=//evil.example></iframe>",
    '<div onclick="alert(1)">x</div>',
    "[x](<javascript:alert(1)>)",
])
def test_hostile_markdown_is_inert(hostile):
    tags = parsed(render_markdown(hostile))
    assert not {name for name, _ in tags} & {"script", "img", "iframe", "div"}, tags
    for _, attrs in tags:
        assert not [a for a in attrs if a.startswith("on")], tags
        assert not re.match(r"\s*(javascript|vbscript|data):", attrs.get("href", ""), re.I), tags


def test_markdown_renders_lists_tables_code_and_safe_links():
    html = render_markdown("- a\n- b\n\n| h |\n|---|\n| c |\n\n```python\nx = 1\n```\n[l](https://e.example)")
    assert "<ul>" in html and "<table>" in html and "<td>c</td>" in html
    assert '<pre class="highlight"><code class="language-python"><span class="n">x</span>' in html
    assert '<a href="https://e.example" target="_blank" rel="noopener noreferrer">l</a>' in html


@pytest.mark.django_db
def test_the_page_escapes_user_text_renders_assistant_markdown_and_has_no_inline_script(client, alice, conversation):
    session = session_active(conversation)
    message_append(session=session, role="user", content="<b>hi</b>\n**not markdown**")
    message_append(session=session, role="assistant", content="**bold** <img src=x onerror=alert(1)>")
    client.force_login(alice)
    page = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert '<div class="text plain">&lt;b&gt;hi&lt;/b&gt;\n**not markdown**</div>' in page
    assert '<div class="text markdown"><p><strong>bold</strong> &lt;img src=x onerror=alert(1)&gt;</p>' in page
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", page, re.S)
    assert scripts and all(body.strip() == "" for body in scripts)  # every script is a file
    assert "/static/js/conversation.js" in page
    assert "hx-on" not in page and "maxlength" not in page.split('id="composer-text"')[1].split(">")[0]


@pytest.mark.django_db
def test_a_compaction_that_saved_under_ten_percent_shows_as_ineffective(conversation):
    session = session_active(conversation)
    CompressionEvent.objects.create(conversation=conversation, session=session, trigger="manual", status="compressed",
                                    tokens_before=10_000, tokens_after=9_500)
    CompressionEvent.objects.create(conversation=conversation, session=session, trigger="manual", status="compressed",
                                    tokens_before=10_000, tokens_after=4_000)
    html = fragments.render_event_feed(conversation)
    items = re.findall(r'<li id="event-\d+" class="([^"]+)"', html)
    assert items == ["event status-compressed", "event status-compressed ineffective"]
    assert html.count("barely helped") == 1


@pytest.mark.django_db
def test_the_double_click_guard_says_what_it_is(client, alice, conversation, django_capture_on_commit_callbacks):
    from sessions.models import ConversationLock
    from sessions.services.locks import lock_release

    session = session_active(conversation)
    for i in range(15):
        message_append(session=session, role="user", content=f"question {i} " + "word " * 300)
        message_append(session=session, role="assistant", content=f"answer {i} " + "word " * 300)
    client.force_login(alice)
    url = reverse("conversation-send", args=[conversation.id])
    with django_capture_on_commit_callbacks(execute=False):
        client.post(url, {"text": "/compress"}, **HTMX)
    assert "already running" in client.post(url, {"text": "/compress"}, **HTMX).content.decode()
    lock = ConversationLock.objects.get(kind="compression")
    lock_release(conversation_id=conversation.id, kind="compression", holder=lock.holder)
    CompressionEvent.objects.filter(status="queued").update(status="compressed")
    body = client.post(url, {"text": "/compress"}, **HTMX).content.decode()
    assert "taken as a double click" in body and "15 s" in body


@pytest.mark.django_db(transaction=True)  # the enqueue runs on a real commit
def test_a_send_the_queue_cannot_take_answers_200_with_the_notice_and_the_waiting_message(
        client, alice, conversation, monkeypatch):
    monkeypatch.setattr(turns_service, "turn_enqueue", lambda turn_id: turns_service.QUEUE_DOWN_NOTICE)
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "hello"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "Your message is saved" in body and 'data-role="queued"' in body
    assert Turn.objects.get().status == "queued"
