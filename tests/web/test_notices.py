from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.urls import reverse

from compression import settings_store
from sessions import fragments, live
from sessions.models import CompressionEvent, Conversation, ConversationLock, Turn, UserNotice
from sessions.services.context import message_append, session_active, session_start
from sessions.services.locks import lock_release
from sessions.services.notices import codex_autoraise_notice_for
from sessions.tasks import conversation_notify
from tests.staff import builders as b
from tests.web.pushes import Page

pytestmark = pytest.mark.django_db


def codex(owner, model="gpt-5.5"):
    return b.conversation(owner, provider="openai-codex", model=model)


def test_it_returns_the_notice_once_per_user(alice, bob):
    first = codex_autoraise_notice_for(alice, codex(alice))
    assert first is not None
    assert "85%" in first and "from 50%" in first
    assert "compression.codex_gpt55_autoraise" in first  # how to opt out
    assert codex_autoraise_notice_for(alice, codex(alice)) is None  # another conversation, same account
    assert codex_autoraise_notice_for(alice, codex(alice, "gpt-5.4-mini")) is None
    assert codex_autoraise_notice_for(bob, codex(bob)) is not None  # bob has his own "once"
    assert UserNotice.objects.filter(key="codex_autoraise").count() == 2


def test_it_returns_nothing_for_other_models(alice):
    for provider, model in [("simulator", "sim-claude-200k"), ("openai-codex", "gpt-5.3"), ("openrouter", "gpt-5.5")]:
        assert codex_autoraise_notice_for(alice, b.conversation(alice, provider=provider, model=model)) is None
    assert not UserNotice.objects.exists()
    assert codex_autoraise_notice_for(alice, codex(alice)) is not None  # not used up by the others


@pytest.mark.parametrize("switch", ["codex_gpt55_autoraise", "codex_gpt55_autoraise_notice"])
def test_it_returns_nothing_when_opted_out(alice, switch):
    settings_store.save_group("compression", {switch: False})
    assert codex_autoraise_notice_for(alice, codex(alice)) is None
    assert not UserNotice.objects.exists()
    settings_store.save_group("compression", {switch: True})
    assert codex_autoraise_notice_for(alice, codex(alice)) is not None


def test_it_returns_nothing_when_the_threshold_is_already_above_85_percent(alice):
    settings_store.save_group("compression", {"threshold": 0.9})
    assert codex_autoraise_notice_for(alice, codex(alice)) is None


def test_it_returns_nothing_to_an_anonymous_user(alice):
    from django.contrib.auth.models import AnonymousUser

    assert codex_autoraise_notice_for(AnonymousUser(), codex(alice)) is None


def test_the_conversation_page_shows_it_once(client, alice):
    conversation = codex(alice)
    client.force_login(alice)
    url = reverse("conversation", args=[conversation.id])
    first = client.get(url).content.decode()
    assert 'id="codex-autoraise-notice">Codex gpt-5.5' in first and "85%" in first
    assert "codex-autoraise-notice" not in client.get(url).content.decode()


# ---- every notice has a kind: at most one of each shows (static/js/notices.js) ----------------

HTMX = {"HTTP_HX_REQUEST": "true"}


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


def tags(body: str, tag: str | None = None, css_class: str | None = None) -> list[dict]:
    parser = _Tags()
    parser.feed(body)
    return [a for t, a in parser.tags
            if (tag is None or t == tag) and (css_class is None or css_class in (a.get("class") or "").split())]


def notice(body: str) -> dict:
    found = tags(body, css_class="notice")
    assert len(found) == 1, body
    return found[0]


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-200k", max_tokens=4096)
    session_start(conversation=c)
    return c


def fill(conversation, pairs: int) -> None:
    session = session_active(conversation)
    for i in range(pairs):
        message_append(session=session, role="user", content=f"question {i} " + "word " * 300)
        message_append(session=session, role="assistant", content=f"answer {i} " + "word " * 300)


def send(client, conversation, text: str):
    return client.post(reverse("conversation-send", args=[conversation.id]), {"text": text}, **HTMX)


def test_it_renders_the_kind_a_caller_names_and_what_makes_the_notice_expire():
    a = notice(fragments.render_to_notice("Done.", kind="queue-cancel", expires_after=10))
    assert (a["data-kind"], a["data-expires-after"], a["class"]) == ("queue-cancel", "10", "notice info")
    assert "data-expires-on" not in a
    pushed = fragments.render_notice("Compression queued.", kind=fragments.COMPRESSION_QUEUED,
                                     expires_on=fragments.expires_when_event_ends(7))
    assert pushed.startswith('<div id="notices" hx-swap-oob="beforeend">')
    b = notice(pushed)
    assert b["data-kind"] == "compression-queued"
    assert b["data-expires-on"].startswith("#event-7:is(") and "[data-status=compressed]" in b["data-expires-on"]
    assert "[data-status=failed]" in b["data-expires-on"] and "[data-status=running]" not in b["data-expires-on"]
    assert notice(fragments.render_to_notice("x", level="error"))["role"] == "alert"
    assert 'class="dismiss link"' in pushed  # every notice can be dismissed


def test_it_derives_a_kind_from_the_text_when_the_caller_names_none():
    announcement = fragments.notice_kind("Maintenance at noon.")
    assert announcement == fragments.notice_kind("Maintenance at noon.")  # the same one twice is one notice
    assert announcement != fragments.notice_kind("Maintenance at one.")  # two different ones are two
    assert fragments.notice_kind("Maintenance at noon.", "warning") != announcement


def test_a_notice_pushed_over_the_socket_carries_its_kind(conversation):
    page = Page(conversation)
    live.notice(conversation.id, "Compression queued.", kind="compression-queued", expires_on="#event-3")
    conversation_notify(str(conversation.id), "Maintenance at noon.")
    first, second = (notice(e["html"]) for e in page.received())
    assert (first["data-kind"], first["data-expires-on"]) == ("compression-queued", "#event-3")
    assert second["data-kind"] == fragments.notice_kind("Maintenance at noon.")


def test_a_notice_rendered_without_a_kind_falls_back_to_its_level(client, alice, conversation, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000  # the request-size guard renders the template itself
    client.force_login(alice)
    response = send(client, conversation, "x" * 2000)
    assert response.status_code == 413
    assert notice(response.content.decode())["data-kind"] == "error"


def test_a_preview_is_a_preview_notice_gone_once_a_later_compaction_is_committed(signed_in, conversation):
    fill(conversation, 15)
    first = notice(send(signed_in, conversation, "/compress --preview").content.decode())
    assert first["data-kind"] == "compaction-preview"
    assert first["data-expires-on"] == "#event-feed li.event:is([data-status=compressed],[data-status=aborted])"
    event = CompressionEvent.objects.create(conversation=conversation, session=session_active(conversation),
                                            trigger="manual", status="failed")
    later = notice(send(signed_in, conversation, "/compress --preview auth").content.decode())
    assert later["data-kind"] == "compaction-preview"
    assert later["data-expires-on"].endswith(f":has(~ #event-{event.id})")  # newer than the latest event


def test_a_queued_compression_is_a_notice_gone_once_its_event_ended(
        signed_in, conversation, django_capture_on_commit_callbacks):
    fill(conversation, 15)
    with django_capture_on_commit_callbacks(execute=False):
        queued = notice(send(signed_in, conversation, "/compress").content.decode())
    event = CompressionEvent.objects.get()
    assert queued["data-kind"] == "compression-queued"
    assert queued["data-expires-on"] == fragments.expires_when_event_ends(event.id)
    busy = notice(signed_in.post(reverse("conversation-compress", args=[conversation.id]), **HTMX).content.decode())
    assert busy["data-kind"] == "compression-duplicate"
    assert busy["data-expires-on"] == fragments.expires_when_event_ends(event.id)  # the running one's end

    lock_release(conversation_id=conversation.id, kind="compression",
                 holder=ConversationLock.objects.get(kind="compression").holder)
    CompressionEvent.objects.filter(id=event.id).update(status="compressed")
    repeat = notice(send(signed_in, conversation, "/compress").content.decode())
    assert (repeat["data-kind"], repeat["data-expires-after"]) == ("compression-duplicate", "10")


def test_a_refused_compression_is_a_compression_notice(signed_in, conversation):
    fill(conversation, 1)
    assert notice(send(signed_in, conversation, "/compress").content.decode())["data-kind"] == "compression-refused"
    settings_store.save_group("compression", {"enabled": False})
    assert notice(send(signed_in, conversation, "/compress").content.decode())["data-kind"] == "compression-refused"


def test_a_refused_send_is_a_send_error_beside_the_composer(signed_in, conversation):
    response = send(signed_in, conversation, "   ")
    assert response.status_code == 422 and response["HX-Retarget"] == "#composer-error"
    assert notice(response.content.decode())["data-kind"] == "send-error"
    assert notice(send(signed_in, conversation, "/nosuch").content.decode())["data-kind"] == "send-error"


def test_a_turn_action_refused_and_a_cancelled_queued_message_have_their_kinds(signed_in, conversation):
    stop = signed_in.post(reverse("turn-stop", args=[conversation.id]), **HTMX)
    assert stop.status_code == 422 and notice(stop.content.decode())["data-kind"] == "turn-action"
    turn = Turn.objects.create(conversation=conversation, text="take this back", status="queued")
    cancelled = notice(signed_in.post(reverse("turn-cancel", args=[conversation.id, turn.id]), **HTMX).content.decode())
    assert (cancelled["data-kind"], cancelled["data-expires-after"]) == ("queue-cancel", "10")
    again = signed_in.post(reverse("turn-cancel", args=[conversation.id, turn.id]), **HTMX)
    assert again.status_code == 422 and notice(again.content.decode())["data-kind"] == "queue-cancel"


def test_a_model_switch_asks_in_a_question_of_its_kind_and_answers_with_notices_of_it(signed_in, conversation):
    url = reverse("conversation-model-switch", args=[conversation.id])
    body = signed_in.post(url, {"model": "simulator:sim-claude-1m"}, **HTMX).content.decode()
    (question,) = [a for a in tags(body, "div") if a.get("id") == "model-switch-confirm"]
    assert question["data-kind"] == "model-switch" and "data-confirm" in question
    assert question["aria-labelledby"] == "model-switch-confirm-title" and 'id="model-switch-confirm-title"' in body
    cancel = [a for a in tags(body, "a") if "data-confirm-cancel" in a]
    assert cancel and cancel[0]["href"] == reverse("conversation", args=[conversation.id])  # the way back without JS
    same = signed_in.post(url, {"model": "simulator:sim-claude-200k", "confirm": "1"}, **HTMX)
    assert notice(same.content.decode())["data-kind"] == "model-switch"
    refused = signed_in.post(url, {"model": "simulator:sim-claude-32k", "confirm": "1"}, **HTMX)
    assert refused.status_code == 422 and notice(refused.content.decode())["data-kind"] == "model-switch"


def test_a_model_switchs_warnings_are_a_list(signed_in, conversation):
    settings_store.save_group("auxiliary", {"provider": "custom", "base_url": "", "model": "sim-claude-32k"})
    url = reverse("conversation-model-switch", args=[conversation.id])
    body = signed_in.post(url, {"model": "simulator:sim-claude-1m"}, **HTMX).content.decode()
    assert len(tags(body, "ul", "confirm-warnings")) == 1
    items = tags(body, "li", "feasibility-warning")
    assert [i["data-level"] for i in items] == ["error", "error", "warning"]
    assert not tags(body, "p", "feasibility-warning")


def test_without_javascript_the_question_is_a_page_and_the_switch_still_works(signed_in, conversation):
    url = reverse("conversation-model-switch", args=[conversation.id])
    page = signed_in.post(url, {"model": "simulator:sim-claude-1m"}).content.decode()
    assert 'id="model-switch-confirm"' in page and "css/notices.css" in page
    assert f'action="{url}"' in page and 'name="confirm" value="1"' in page
    assert signed_in.post(url, {"model": "simulator:sim-claude-1m", "confirm": "1"}).status_code == 302
    conversation.refresh_from_db()
    assert conversation.model == "sim-claude-1m"


def test_the_conversation_page_loads_the_notices_script_first_and_has_the_dialog(signed_in, conversation):
    page = signed_in.get(reverse("conversation", args=[conversation.id])).content.decode()
    scripts = [a for a in tags(page, "script") if a.get("src", "").startswith("/static/js/")]
    names = [a["src"].rsplit("/", 1)[1] for a in scripts]
    # First of the page's own scripts: its Esc listener on a question runs before the others'.
    assert names.index("notices.js") < min(names.index(n) for n in ("conversation.js", "sidebar.js", "shortcuts.js"))
    assert all("defer" in a for a in scripts)
    assert any(a.get("href", "").endswith("css/notices.css") for a in tags(page, "link"))
    (dialog,) = tags(page, "dialog")
    assert dialog["id"] == "confirm-dialog" and "open" not in dialog
