"""The look on the fast tier: the content-security policy on every response (strict: no inline
script or style, no eval, the websocket named); no page or pushed fragment carries an inline
style, an inline script, a <style> element or an event-handler attribute; markdown tables align
by class; the colour theme is saved per user by a CSRF-protected POST (JSON for theme.js, a
redirect back for a plain form) and put on <html data-theme>."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.urls import reverse

from sessions import fragments
from sessions.markdown import pygments_css, render_markdown
from sessions.models import Conversation, UserPreference
from sessions.services.context import message_append, session_start
from simulator.policy import MARKDOWN_REPLY

TABLE = "| left | centre | right |\n|:--|:-:|--:|\n| a | b | c |"


class Inline(HTMLParser):
    """What a strict policy refuses: style attributes, <style>, inline <script>, on* handlers."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._script = False

    def handle_starttag(self, tag, attrs):
        names = {k for k, _ in attrs}
        if "style" in names:
            self.found.append(f"<{tag} style=…>")
        self.found += [f"<{tag} {k}=…>" for k in names if k.startswith("on")]
        if tag == "style":
            self.found.append("<style>")
        if tag == "script":
            self._script = True
            if "src" not in names:
                self.found.append("<script> without src")

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = False

    def handle_data(self, data):
        if self._script and data.strip():
            self.found.append("<script> with a body")


def inline(html: str) -> list[str]:
    parser = Inline()
    parser.feed(html)
    return parser.found


def policy_of(response) -> dict[str, str]:
    header = response["Content-Security-Policy"]
    return dict(part.strip().split(" ", 1) for part in header.split(";"))


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k", title="Look")
    session = session_start(conversation=c)
    message_append(session=session, role="user", content='<b style="color:red" onclick="x()">hi</b>')
    message_append(session=session, role="assistant", content=f"{MARKDOWN_REPLY}\n\n{TABLE}")
    return c


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_superuser("root", password="root-password-1")


@pytest.mark.django_db
def test_every_page_has_the_strict_policy_and_no_inline_style_or_script(client, alice, root, conversation):
    anonymous = Client()
    pages = [(anonymous, "/accounts/login/", 200)]
    client.force_login(alice)
    pages += [(client, "/", 200), (client, f"/conversations/{conversation.id}/", 200), (client, "/no/such/page", 404),
              (client, f"/conversations/{conversation.id}/search?q=step", 200),
              (client, f"/conversations/{conversation.id}/messages/{conversation.messages.first().id}/", 200)]
    staff = Client()
    staff.force_login(root)
    pages += [(staff, "/staff/", 200), (staff, "/admin/", 200),
              (staff, "/admin/compression/compressionsettings/import-config/", 200)]
    admin_index = staff.get("/admin/").content.decode()
    settings_pages = sorted(set(re.findall(r'href="(/admin/compression/[a-z]+/)"', admin_index)))
    assert len(settings_pages) >= 6
    pages += [(staff, path, 200) for path in settings_pages]
    for who, path, status in pages:
        response = who.get(path, follow=True)
        assert response.status_code == status, path
        policy = policy_of(response)
        for directive in ("default-src", "script-src", "style-src", "img-src", "font-src"):
            assert policy[directive] == "'self'", (path, directive)
        assert policy["object-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
        header = response["Content-Security-Policy"]
        assert "unsafe-inline" not in header and "unsafe-eval" not in header
        assert inline(response.content.decode()) == [], path


def test_the_policy_names_the_websocket_of_this_host(client):
    connect = policy_of(client.get("/accounts/login/"))["connect-src"].split()
    assert connect[0] == "'self'"
    assert {"ws://127.0.0.1:*", "wss://127.0.0.1:*", "ws://localhost:*"} <= set(connect)


@pytest.mark.django_db
def test_pushed_fragments_have_no_inline_style_either(alice, conversation):
    html = "".join([fragments.render_gauge(conversation), fragments.render_cache_panel(conversation),
                    fragments.render_event_feed(conversation), fragments.render_transcript(conversation),
                    fragments.render_turn_status(conversation),
                    fragments.render_message(conversation.messages.last())])
    assert inline(html) == []
    gauge = fragments.render_gauge(conversation)
    assert re.search(r'<rect class="fill" x="0" y="9" width="[\d.]+%"', gauge)
    assert re.search(r'id="threshold-marker" x="[\d.]+%"', gauge)
    assert 'class="level-word"' in gauge and "aria-valuetext=" in gauge


def test_markdown_table_alignment_is_a_class_and_a_written_style_is_dropped():
    html = render_markdown(TABLE)
    assert '<th class="align-left">left</th>' in html and '<th class="align-center">centre</th>' in html
    assert '<td class="align-right">c</td>' in html
    assert "style=" not in html
    assert "style=" not in render_markdown("| a |\n|---|\n| b |")
    assert "<script" not in render_markdown("<td style=\"color:red\" class=\"align-left\">x</td>")


def test_the_dark_code_style_is_scoped_to_the_dark_theme():
    css = pygments_css()
    assert ':root[data-theme="dark"] .markdown .highlight { background: #0d1117' in css
    assert '@media (prefers-color-scheme: dark) {\n:root:not([data-theme="light"]) .markdown .highlight' in css
    with open("static/css/pygments.css") as f:
        assert f.read().endswith(css)  # the shipped file is the generated one


@pytest.mark.django_db
def test_the_theme_is_saved_per_user_and_put_on_the_page(client, alice, bob):
    client.force_login(alice)
    assert '<html lang="en" data-theme="auto">' in client.get("/").content.decode()
    response = client.post(reverse("theme-set"), {"theme": "dark"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 200 and response.json() == {"theme": "dark"}
    page = client.get("/").content.decode()
    assert '<html lang="en" data-theme="dark">' in page
    assert 'value="dark" title="Always dark" aria-pressed="true"' in page
    assert 'value="auto" title="Follow the system&#x27;s light or dark setting" aria-pressed="false"' in page

    other = Client()
    other.force_login(bob)
    assert '<html lang="en" data-theme="auto">' in other.get("/").content.decode()
    assert UserPreference.objects.get(user=alice).theme == "dark"
    assert not UserPreference.objects.filter(user=bob).exists()


@pytest.mark.django_db
def test_a_plain_form_post_goes_back_to_the_page_but_never_off_site(client, alice, conversation):
    client.force_login(alice)
    page = f"/conversations/{conversation.id}/"
    response = client.post(reverse("theme-set"), {"theme": "light", "next": page})
    assert response.status_code == 302 and response["Location"] == page
    assert UserPreference.objects.get(user=alice).theme == "light"
    for hostile in ("https://evil.example/", "//evil.example/", "javascript:alert(1)"):
        response = client.post(reverse("theme-set"), {"theme": "auto", "next": hostile})
        assert response["Location"] == reverse("home"), hostile


@pytest.mark.django_db
def test_the_theme_post_needs_csrf_a_login_post_and_a_known_theme(alice):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(alice)
    assert csrf_client.post(reverse("theme-set"), {"theme": "dark"}).status_code == 403
    token = csrf_client.get("/").context["csrf_token"]
    assert csrf_client.post(reverse("theme-set"), {"theme": "dark", "csrfmiddlewaretoken": str(token)}).status_code == 302

    client = Client()
    client.force_login(alice)
    assert client.post(reverse("theme-set"), {"theme": "purple"}).status_code == 400
    assert client.get(reverse("theme-set")).status_code == 405
    assert UserPreference.objects.get(user=alice).theme == "dark"

    anonymous = Client()
    response = anonymous.post(reverse("theme-set"), {"theme": "light"})
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert UserPreference.objects.get(user=alice).theme == "dark"


@pytest.mark.django_db
def test_pages_name_an_icon_and_favicon_ico_leads_to_it(client):
    page = client.get("/accounts/login/").content.decode()
    icon = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert icon and icon.group(1).endswith("img/favicon.svg")
    response = client.get("/favicon.ico")  # asked for by browsers on pages that name no icon (the admin's)
    assert response.status_code == 301 and response["Location"] == icon.group(1)
