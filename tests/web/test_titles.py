"""Conversation titles: the cleaned first line a conversation gets when its first message is sent
(a pasted log, a code block, a long line), the title the auxiliary model makes after the first
reply (the real SDK against the simulator's title trigger), the fallback when that call fails or
no auxiliary model is configured, and a manual title that nothing replaces."""
from __future__ import annotations

import pytest

from compression import settings_store
from sessions.models import ApiCall, Conversation, Turn
from sessions.services import titles
from sessions.services.context import message_append, session_start
from sessions.services.conversations import conversation_title_make
from sessions.services.turns import turn_submit
from simulator import parse_fault
from simulator import title as sim_title
from tests.web.pushes import Page

LOG = """

2024-05-01 12:00:01,123 ERROR [worker-3] Connection refused: db.internal:5432
2024-05-01 12:00:02,456 INFO retrying in 5 s
Traceback (most recent call last):
  File "app.py", line 10, in <module>
"""


# Cleaning --------------------------------------------------------------------------------------

def test_a_pasted_log_gives_its_first_meaningful_line_without_line_breaks():
    title = titles.title_from_message(LOG)
    assert title == "ERROR [worker-3] Connection refused: db.internal:5432"
    assert "\n" not in title and len(title) <= titles.TITLE_MAX_CHARS
    assert titles.title_from_message("=" * 20 + "\n==== build 4417 ====\nok") == "build 4417"
    assert titles.title_from_message("[12:00:01.5] worker started\n[12:00:02] ready") == "worker started"


def test_a_code_block_is_stripped_in_favour_of_the_prose_around_it():
    assert titles.title_from_message("```python\nimport os\nprint(os.getcwd())\n```\nWhy does this print /tmp?") \
        == "Why does this print /tmp?"
    # Only code: its first line that says something, the fences gone.
    assert titles.title_from_message("```\n\n$ make test\nFAILED tests/test_x.py\n```") == "$ make test"


def test_markdown_is_stripped_and_whitespace_collapsed():
    assert titles.title_from_message("## Deploy **plan**   for `api`\n\n- step one") == "Deploy plan for api"
    assert titles.title_from_message("> see [the docs](https://x.example/a) \t now") == "see the docs now"
    assert titles.title_from_message("   \n\n---\n") == titles.DEFAULT_TITLE


def test_html_tags_go_but_other_angle_brackets_are_the_users_words():
    assert titles.title_from_message("<b>Deploy</b> the <span class='x'>api</span>") == "Deploy the api"
    assert titles.title_from_message("Check List<String> rendering") == "Check List<String> rendering"
    assert titles.title_from_message("What goes in <config-dir>/hermes.yaml?") == "What goes in <config-dir>/hermes.yaml?"


def test_a_long_line_is_cut_at_a_word_boundary_with_an_ellipsis():
    text = ("Please help me understand why the compression threshold of the two hundred thousand token model "
            "is set where it is")
    title = titles.title_from_message(text)
    assert title == "Please help me understand why the compression threshold of…"
    assert len(title) <= 60 and title.endswith("…") and not title[:-1].endswith(" ")
    path = "/usr/local/lib/python3.11/site-packages/django/db/backends/sqlite3/base.py"
    assert len(titles.title_from_message(path)) == 60  # one long word: cut where it must be


def test_a_models_answer_is_cleaned_too():
    assert titles.title_from_answer('Title: "Rotating the deploy key."') == "Rotating the deploy key"
    assert titles.title_from_answer("**Gateway port question**\n\nmore text") == "Gateway port question"
    assert titles.title_from_answer("  \n") == ""


def test_the_simulator_recognises_the_title_prompt_and_nothing_else():
    prompt = titles.title_prompt("can you help me rotate the deploy key every 30 days?", "Sure, here is how.")
    assert sim_title.is_title_prompt(prompt)
    assert sim_title.title_for(prompt) == "Help rotate deploy key every"
    assert not sim_title.is_title_prompt("repeat exactly: Write a title for this conversation")
    assert not sim_title.is_title_prompt("Write a title for this conversation please")


# At submit -------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_first_message_titles_the_conversation_at_once(alice, django_capture_on_commit_callbacks):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    with django_capture_on_commit_callbacks(execute=False):
        turn_submit(user=alice, conversation_id=c.id, text=LOG)
    c.refresh_from_db()
    assert c.title == "ERROR [worker-3] Connection refused: db.internal:5432"
    with django_capture_on_commit_callbacks(execute=False):
        turn_submit(user=alice, conversation_id=c.id, text="a second message")
    c.refresh_from_db()
    assert c.title == "ERROR [worker-3] Connection refused: db.internal:5432"


# After the first reply -------------------------------------------------------------------------

@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


@pytest.fixture
def auxiliary(eager_simulator):
    settings_store.save_group("auxiliary", {"provider": "simulator", "model": "sim-claude-200k"})
    return eager_simulator


def run_turn(user, conversation, text, capture) -> Turn:
    with capture(execute=True):
        turn, _ = turn_submit(user=user, conversation_id=conversation.id, text=text)
    turn.refresh_from_db()
    assert turn.status == "done", turn.error
    return turn


@pytest.mark.django_db
def test_the_auxiliary_model_titles_the_conversation_after_the_first_reply(alice, conversation, auxiliary,
                                                                           django_capture_on_commit_callbacks):
    page = Page(conversation)
    run_turn(alice, conversation, "can you help me rotate the deploy key every 30 days?",
             django_capture_on_commit_callbacks)
    conversation.refresh_from_db()
    assert conversation.title == "Help rotate deploy key every"
    assert not conversation.title_manual
    call = ApiCall.objects.get(conversation=conversation, purpose="title")
    assert (call.provider, call.model, call.error) == ("simulator", "sim-claude-200k", "")
    assert call.output_tokens > 0
    pushed = page.html()
    assert 'innerHTML:#conversation-title">can you help me rotate the deploy key every 30 days?</span>' in pushed
    assert 'innerHTML:#conversation-title">Help rotate deploy key every</span>' in pushed
    # Only the first exchange makes a title.
    run_turn(alice, conversation, "and what about the staging key?", django_capture_on_commit_callbacks)
    conversation.refresh_from_db()
    assert conversation.title == "Help rotate deploy key every"
    assert ApiCall.objects.filter(conversation=conversation, purpose="title").count() == 1


@pytest.mark.django_db
def test_a_failed_auxiliary_call_keeps_the_cleaned_first_line(alice, conversation, auxiliary):
    session = session_start(conversation=conversation)
    message_append(session=session, role="user", content="## Why is the **gateway** on port 8443?\nmore detail")
    message_append(session=session, role="assistant", content="Because of the blue load balancer.")
    auxiliary.sim.faults.push(parse_fault("401"), 1)
    assert conversation_title_make(conversation_id=conversation.id) == "Why is the gateway on port 8443?"
    conversation.refresh_from_db()
    assert conversation.title == "Why is the gateway on port 8443?"
    call = ApiCall.objects.get(conversation=conversation, purpose="title")
    assert call.error != ""


@pytest.mark.django_db
def test_without_an_auxiliary_model_no_model_is_asked(alice, conversation, eager_simulator,
                                                     django_capture_on_commit_callbacks):
    run_turn(alice, conversation, "```\nTraceback (most recent call last):\n```\nplease explain this error",
             django_capture_on_commit_callbacks)
    conversation.refresh_from_db()
    assert conversation.title == "please explain this error"
    assert not ApiCall.objects.filter(conversation=conversation, purpose="title").exists()


@pytest.mark.django_db
def test_a_manual_title_is_never_replaced(client, alice, conversation, auxiliary, django_capture_on_commit_callbacks):
    client.force_login(alice)
    client.post(f"/conversations/{conversation.id}/rename", {"title": "My own title"}, HTTP_HX_REQUEST="true")
    run_turn(alice, conversation, "can you help me rotate the deploy key?", django_capture_on_commit_callbacks)
    conversation.refresh_from_db()
    assert (conversation.title, conversation.title_manual) == ("My own title", True)
    assert not ApiCall.objects.filter(conversation=conversation, purpose="title").exists()
    # A rename that lands while the title is being made wins too.
    Conversation.objects.filter(pk=conversation.pk).update(title="Renamed meanwhile", title_manual=True)
    assert conversation_title_make(conversation_id=conversation.id) is None
    conversation.refresh_from_db()
    assert conversation.title == "Renamed meanwhile"
