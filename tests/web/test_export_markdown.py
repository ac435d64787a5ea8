"""The Markdown export (sessions/services/export_markdown.py) of a conversation made the way the
product makes one: a message with an attached image sent through the composer, tool calls with a
long result, hostile text, a real compaction by the in-process simulator (rotation and in place),
and a regenerated reply. The transcript is checked as a renderer that passes raw HTML through
would show it: the compaction's divider and summary, the archived originals and the replaced reply
in their own collapsed sections, the tool call and its result cut at the limit, the attachment's
link, and hostile text that neither closes a section nor becomes a script."""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from markdown_it import MarkdownIt

from compression.core.markers import END_MARKER, SUMMARY_PREFIX, strip_summary_wrapping
from sessions.models import Attachment, CompressionEvent, Conversation, Message
from sessions.services import export_markdown
from sessions.services.compaction import compression_inline
from sessions.services.context import message_append, session_active, session_start
from sessions.services.export_markdown import TOOL_TEXT_LIMIT, iter_markdown, markdown_safe
from sessions.services.turns import turn_regenerate, turn_submit
from tests.web.test_attachments import png

pytestmark = pytest.mark.django_db

HOSTILE = "</details><script>alert(1)</script> and <b onclick=x>bold</b>; `List<int>` stays code"
LONG_RESULT = "0123456789" * 500  # 5,000 characters
PERMISSIVE = MarkdownIt("commonmark")  # raw HTML passes through, as some Markdown viewers do


# An HTML tree, to assert structure rather than substrings ------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict, parent: Node | None):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self, tag: str | None = None):
        for child in self.children:
            if isinstance(child, Node):
                if tag is None or child.tag == tag:
                    yield child
                yield from child.iter(tag)

    def find(self, tag: str, **attrs) -> list[Node]:
        return [n for n in self.iter(tag) if all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def ancestors(self):
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, dict(attrs), self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_html(markup: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(markup)
    builder.close()
    return builder.root


def message_headings(tree: Node) -> list[Node]:
    """The messages' headings (a summary's own headings are inside its quote)."""
    return [h for h in tree.iter("h3") if not any(a.tag == "blockquote" for a in h.ancestors())]


def section(tree: Node, label_start: str) -> Node:
    """The one <details> whose <summary> starts with `label_start`."""
    found = [d for d in tree.iter("details") if next(d.iter("summary")).text().startswith(label_start)]
    assert len(found) == 1, [next(d.iter("summary")).text() for d in tree.iter("details")]
    return found[0]


# The conversation ------------------------------------------------------------------------------------

def fill(conversation, pairs: int) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"question {i} " + "word " * 300)
        message_append(session=session, role="assistant", content=f"answer {i} " + "word " * 300)


def build(client, alice, capture, *, in_place: bool):
    """The conversation of the module docstring, on the simulator; (conversation, event, attachment,
    the replaced reply)."""
    conversation = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=conversation)
    client.force_login(alice)
    upload = SimpleUploadedFile("photo.png", png(), content_type="image/png")
    image = client.post(reverse("attachment-upload", args=[conversation.id]), {"file": upload}).json()
    with capture(execute=True):
        client.post(reverse("conversation-send", args=[conversation.id]),
                    {"text": "What is in this photo?", "attachments": [str(image["id"])]}, HTTP_HX_REQUEST="true")
    session = session_active(conversation)
    message_append(session=session, role="user", content=HOSTILE)
    call = {"id": "call_1", "type": "function", "function": {"name": "read_file",
                                                             "arguments": json.dumps({"path": "notes.md"})}}
    message_append(session=session, role="assistant", content="", tool_calls=[call])
    message_append(session=session, role="tool", content=LONG_RESULT, tool_call_id="call_1", name="read_file")
    message_append(session=session, role="assistant", content="Here it is:\n\n```python\nprint('open fence')")
    fill(conversation, 12)
    event = compression_inline(conversation_id=conversation.id, trigger="manual", force=True, in_place=in_place).event
    assert event.status == "compressed", event.reason
    with capture(execute=True):
        turn_submit(user=alice, conversation_id=conversation.id, text="after the compaction")
    old = Message.objects.filter(conversation=conversation, role="assistant").latest("id")
    with capture(execute=True):
        turn_regenerate(user=alice, conversation_id=conversation.id)
    old.refresh_from_db()
    assert old.replaced
    conversation.refresh_from_db()
    return conversation, event, Attachment.objects.get(id=image["id"]), old


@pytest.fixture(autouse=True)
def _folders(settings, tmp_path):
    settings.HERMES_ATTACHMENTS_DIR = tmp_path / "attachments"
    settings.HERMES_WORKSPACES_DIR = tmp_path / "workspaces"


@pytest.fixture(params=[False, True], ids=["rotation", "in-place"])
def exported(request, client, alice, eager_simulator, django_capture_on_commit_callbacks):
    conversation, event, attachment, old = build(client, alice, django_capture_on_commit_callbacks,
                                                 in_place=request.param)
    markdown = "".join(iter_markdown(conversation, base_url="http://testserver"))
    return conversation, event, attachment, old, markdown


# The tests -------------------------------------------------------------------------------------------

def test_the_only_raw_html_is_the_sections_it_opens_and_closes(exported):
    *_, markdown = exported
    blocks = [t.content for t in PERMISSIVE.parse(markdown) if t.type == "html_block"]
    inline = [c.content for t in PERMISSIVE.parse(markdown) if t.type == "inline" for c in t.children
              if c.type == "html_inline"]
    assert inline == []
    opened = [b for b in blocks if re.fullmatch(r"<details>\n<summary>[^<>]*</summary>\n", b)]
    closed = [b for b in blocks if b == "</details>\n"]
    assert len(opened) == len(closed) >= 2 and len(opened) + len(closed) == len(blocks), blocks


def test_it_shows_the_compaction_as_a_divider_with_its_summary(exported):
    conversation, event, *_, markdown = exported
    tree = parse_html(PERMISSIVE.render(markdown))
    assert next(tree.iter("h1")).text() == conversation.title
    head = (f"Compacted {event.messages_before:,} messages into {event.messages_after:,} "
            f"({event.tokens_before:,} → {event.tokens_after:,} tokens, manual)")
    assert f"---\n\n**Compacted {event.messages_before:,} messages into {event.messages_after:,}**" in markdown
    paragraphs = [p for p in tree.iter("p") if p.text().startswith(head)]
    assert len(paragraphs) == 1
    divider = paragraphs[0]
    siblings = [c for c in divider.parent.children if isinstance(c, Node)]
    at = siblings.index(divider)
    assert siblings[at - 1].tag == "hr" and siblings[at + 1].tag == "blockquote"
    assert siblings[at + 1].text().strip().startswith("Summary")
    summary = markdown_safe(strip_summary_wrapping(event.summary)).split("\n")
    assert len(summary) > 3 and SUMMARY_PREFIX not in markdown and END_MARKER not in markdown
    assert "\n".join(f"> {line}" if line.strip() else ">" for line in summary) in markdown
    # Outside every section: the divider is what replaced the originals.
    assert not any(a.tag == "details" for a in divider.ancestors())


def test_the_archived_originals_are_collapsed_with_hostile_text_kept_as_text(exported):
    _, event, *_, markdown = exported
    tree = parse_html(PERMISSIVE.render(markdown))
    assert list(tree.iter("script")) == []
    assert not any("onclick" in n.attrs for n in tree.iter())
    archived = section(tree, "Archived originals: the ")
    label = next(archived.iter("summary")).text()
    # A rotation ends the whole session (head and tail included); in place, only the middle is archived.
    assert ("summarised" in label) == event.in_place and ("as it was written" in label) == (not event.in_place)
    users = [p for p in archived.iter("p") if "alert(1)" in p.text()]
    assert len(users) == 1
    assert users[0].text().startswith("</details><script>alert(1)</script> and <b onclick=x>bold</b>;")
    assert [c.text() for c in users[0].iter("code")] == ["List<int>"]  # a code span is left as it was
    headings = [h.text() for h in archived.iter("h3")]
    assert sum(h.startswith("User") for h in headings) == 14  # the photo, the hostile one, 12 questions
    # The reply whose code fence was never closed did not swallow what follows it.
    fence = [c for c in archived.iter("code") if "open fence" in c.text()]
    assert len(fence) == 1 and fence[0].text() == "print('open fence')\n"


def test_the_tool_call_and_its_result_are_fenced_and_cut_at_the_limit(exported):
    *_, markdown = exported
    tree = parse_html(PERMISSIVE.render(markdown))
    call = [p for p in tree.iter("p") if p.text() == "Tool call read_file"]
    assert len(call) == 1 and [c.text() for c in call[0].iter("code")] == ["read_file"]
    blocks = [c.text() for c in tree.iter("code") if c.attrs.get("class") == "language-json"]
    assert [json.loads(b) for b in blocks] == [{"path": "notes.md"}]
    result = [h for h in tree.iter("h3") if h.text().startswith("Tool result · read_file · ")]
    assert len(result) == 1
    code = [c.text() for c in tree.iter("code") if c.attrs.get("class") == "language-text"]
    assert code == [LONG_RESULT[:TOOL_TEXT_LIMIT] + "\n"]
    assert f"*… (cut, {len(LONG_RESULT):,} characters in all)*" in markdown


def test_the_attachment_is_a_link_to_its_download(exported):
    _, _, attachment, *_, markdown = exported
    tree = parse_html(PERMISSIVE.render(markdown))
    links = [a for a in tree.iter("a") if a.text() == "photo.png"]
    assert [a.attrs["href"] for a in links] == [f"http://testserver/attachments/{attachment.id}"]
    assert links[0].parent.text().startswith("photo.png (image, ")


def test_the_replaced_reply_is_in_its_own_section_before_the_new_one(exported):
    conversation, _, _, old, markdown = exported
    tree = parse_html(PERMISSIVE.render(markdown))
    replaced = section(tree, "Replaced reply (archived when the reply was regenerated)")
    assert [h.text().split(" · ")[0] for h in replaced.iter("h3")] == ["Assistant"]
    assert old.content.split("\n")[0][:40] in replaced.text()
    newest = Message.objects.filter(conversation=conversation, role="assistant").latest("id")
    assert newest.id > old.id and not newest.replaced
    # The last heading is the new reply, outside every section.
    last = message_headings(tree)[-1]
    assert last.text().startswith("Assistant") and not any(a.tag == "details" for a in last.ancestors())
    # Every visible message has its heading (a summary is the divider instead).
    shown = Message.objects.filter(conversation=conversation, visible=True, is_summary=False).count()
    assert len(message_headings(tree)) == shown
    assert CompressionEvent.objects.filter(conversation=conversation, status="compressed").count() == 1


# markdown_safe on its own -----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "<script>alert(1)</script>",
    "</details>\n\n<details open><summary>x</summary>",
    "text <img src=x onerror=alert(1)> more",
    "# title `\n<script>alert(1)</script> `",
    "<div>\n```\n\n```\n<script>alert(1)</script>\n```",
    "<!-- a comment that never ends",
    "> <pre>\n> quoted",
])
def test_no_raw_html_survives_markdown_safe(text):
    safe = markdown_safe(text)
    tokens = PERMISSIVE.parse(safe)
    assert not any(t.type == "html_block" for t in tokens)
    assert not any(c.type == "html_inline" for t in tokens if t.type == "inline" for c in t.children)
    assert "<script" not in PERMISSIVE.render(safe)


def test_markdown_safe_leaves_ordinary_markdown_alone():
    text = "A list:\n\n- `a < b` in code\n- **bold**\n\n```html\n<p>in a fence</p>\n```"
    assert markdown_safe(text) == text


def test_a_fence_longer_than_any_backtick_run_in_the_content():
    block = export_markdown.fenced("before\n````\nafter", "text")
    assert block.startswith("`````text\n") and block.endswith("\n`````")
    tokens = PERMISSIVE.parse(block)
    assert [t.type for t in tokens] == ["fence"] and tokens[0].content == "before\n````\nafter\n"
