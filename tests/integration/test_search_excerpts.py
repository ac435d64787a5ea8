"""Search excerpts keep the text as written on every backend: `<...>` in a message (generics, markup,
a comparison) reaches the agent's context_search and the sidebar's search whole, where
PostgreSQL's ts_headline would take it for an HTML tag and leave it out. No services: this runs in
the integration tier so that the PostgreSQL pass runs it too."""
from __future__ import annotations

import pytest

from sessions.models import Conversation
from sessions.services import recall
from sessions.services.context import message_append, session_start

pytestmark = pytest.mark.django_db

WRITTEN = 'The rotation helper keeps a < b > c, returns List<String> of hostnames and renders <div class="hosts">.'


@pytest.fixture(autouse=True)
def index(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        recall.index_ensure_after_migrate(sender=None, using="default")


def test_angle_brackets_survive_in_the_agents_and_the_sidebars_excerpts(alice):
    conversation = Conversation.objects.create(owner=alice)
    session = session_start(conversation=conversation)
    message_append(session=session, role="user", content="Let us look at the hostname rotation.")
    fact = message_append(session=session, role="assistant", content=WRITTEN)

    hits = recall.search(conversation_id=conversation.id, query="rotation helper hostnames")
    assert hits and hits[0].id == fact.id
    for piece in ("List<String>", '<div class="hosts', "a < b > c"):  # an excerpt may end on the last word
        assert piece in hits[0].snippet, hits[0].snippet
    assert "&lt;String&gt;" in hits[0].snippet_html and "<String>" not in hits[0].snippet_html  # escaped for a page

    owned = recall.search_owner(owner_id=alice.id, query="rotation helper")
    row = next(h for h in owned if h.id == fact.id)
    assert "List<String>" in row.snippet, row.snippet
    assert "<String>" not in row.snippet_html
