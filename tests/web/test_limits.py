"""Per-user limits on the fast tier: each limit (messages per minute and per day, input and output
tokens per day with the summariser's calls counted, money per month at the catalogue's prices)
refuses the next send with the reason and the time it resets, nothing stored; a user's own limits
beat the default; every path that queues a turn is checked; a fresh installation has no limits;
the refusal reaches the composer; the admin validates and audits the limits."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from compression.models import SettingsChange
from llm.usage import Usage
from sessions.models import ApiCall, Conversation, LimitDefaults, Turn, UsageDay, UserLimits
from sessions.services import limits
from sessions.services.context import session_active, session_start
from sessions.services.turns import TurnRejected, turn_edit, turn_regenerate, turn_retry, turn_submit
from sessions.services.usage import price_of, usage_record

HTMX = {"HTTP_HX_REQUEST": "true"}
pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(alice):
    c = Conversation.objects.create(owner=alice, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def send(user, conversation, text="hello"):
    """Submit without running the turn (the queue's hand-over never runs in this transaction)."""
    return turn_submit(user=user, conversation_id=conversation.id, text=text).turn


def defaults(**values) -> LimitDefaults:
    row = LimitDefaults.load()
    for name, value in values.items():
        setattr(row, name, value)
    row.save()
    return row


def refused(user, conversation) -> str:
    before = Turn.objects.count()
    with pytest.raises(TurnRejected) as caught:
        send(user, conversation)
    assert Turn.objects.count() == before  # nothing stored
    return str(caught.value)


def record(conversation, *, purpose="agent", model="sim-claude-64k", **tokens) -> ApiCall:
    """A model call as the agent loop and the compaction service record it."""
    return usage_record(conversation_id=conversation.id, session_id=session_active(conversation).id,
                        usage=Usage(**tokens), model=model, provider="simulator", purpose=purpose)


def tomorrow_words(now=None) -> str:
    day = (now or timezone.now()).astimezone(dt.UTC).date() + dt.timedelta(days=1)
    return f"00:00 UTC on {day.day} {day:%B}"


# ---------------------------------------------------------------- no limits


def test_a_fresh_installation_has_no_limits_and_counts_every_message(alice, conversation):
    assert not LimitDefaults.objects.exists() and not limits.limits_for(alice).any
    for i in range(30):
        send(alice, conversation, f"message {i}")
    assert Turn.objects.filter(conversation=conversation).count() == 30
    assert UsageDay.objects.get(user=alice).messages == 30


def test_zero_is_no_limit(alice, conversation):
    defaults(messages_per_minute=0, messages_per_day=0, input_tokens_per_day=0, output_tokens_per_day=0,
             cost_per_month=Decimal(0))
    assert limits.limits_for(alice) == limits.Limits()
    for _ in range(3):
        send(alice, conversation)


# ---------------------------------------------------------------- each limit


def test_the_per_minute_limit_refuses_with_the_second_the_oldest_send_leaves_the_window(alice, conversation):
    defaults(messages_per_minute=3)
    for i in range(3):
        send(alice, conversation, f"m{i}")
    text = refused(alice, conversation)
    first = Turn.objects.order_by("created_at").first().created_at.astimezone(dt.UTC)
    again = first.replace(microsecond=0) + dt.timedelta(seconds=61 if first.microsecond else 60)
    assert text == (f"You have sent 3 messages in the last minute, your limit of 3 a minute; "
                    f"you can send again at {again:%H:%M:%S} UTC.")
    # The oldest send leaves the window: one more goes, and the next is refused again.
    Turn.objects.filter(id=Turn.objects.order_by("created_at").first().id).update(
        created_at=timezone.now() - dt.timedelta(seconds=61))
    send(alice, conversation, "m3")
    assert "3 messages in the last minute" in refused(alice, conversation)


def test_the_per_day_limit_counts_today_only_and_resets_at_midnight_utc(alice, conversation):
    defaults(messages_per_day=2)
    UsageDay.objects.create(user=alice, day=timezone.now().date() - dt.timedelta(days=1), messages=50)
    send(alice, conversation)
    send(alice, conversation)
    text = refused(alice, conversation)
    assert text.startswith("You have sent 2 messages today, your daily limit of 2; you can send again at "
                           f"{tomorrow_words()} (in ")


def test_input_tokens_per_day_count_the_summarisers_calls(alice, conversation):
    defaults(input_tokens_per_day=10_000)
    record(conversation, input=4_000, output=100)
    send(alice, conversation)
    # The summariser's call takes the day over the limit: its whole prompt counts, cache included.
    record(conversation, purpose="compression", input=3_000, cache_read=2_500, cache_write=500, output=900)
    assert UsageDay.objects.get(user=alice).summariser_input_tokens == 6_000
    text = refused(alice, conversation)
    assert text.startswith("Your conversations have used 10,000 input tokens today (the summariser's included), "
                           f"your daily limit of 10,000; you can send again at {tomorrow_words()} (in ")


def test_output_tokens_per_day_count_the_summarisers_calls(alice, conversation):
    defaults(output_tokens_per_day=1_000)
    record(conversation, input=10, output=600)
    send(alice, conversation)
    record(conversation, purpose="compression", input=10, output=500)
    text = refused(alice, conversation)
    assert text.startswith("Your conversations have used 1,100 output tokens today (the summariser's included), "
                           "over your daily limit of 1,000; you can send again at ")


def test_a_summarisers_call_alone_reaches_the_token_limit(alice, conversation):
    """A compression's summariser, not the agent, used the day's tokens: the next send is refused."""
    defaults(input_tokens_per_day=5_000)
    record(conversation, purpose="compression", input=5_000, output=200)
    assert "5,000 input tokens today" in refused(alice, conversation)


def test_money_per_month_at_the_catalogue_prices_resets_on_the_first_of_next_month(alice, conversation):
    price = price_of("sim-claude-64k")  # the price table's row (seeded from the catalogue)
    record(conversation, input=1_000_000, output=100_000)
    cost = Decimal(str(price["input"])) + Decimal(str(price["output"])) / 10
    assert cost == Decimal("4.5")
    assert limits.usage_of(alice).month.cost == cost
    defaults(cost_per_month=cost + Decimal("0.01"))
    send(alice, conversation)  # under the limit
    record(conversation, purpose="compression", input=10_000)  # the summariser's 3 cents take it over
    now = timezone.now().astimezone(dt.UTC)
    first = (now.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    text = refused(alice, conversation)
    assert text.startswith(f"Your conversations have cost ${cost + Decimal('0.03'):,.2f} this month, over your "
                           f"monthly limit of ${cost + Decimal('0.01'):,.2f}; you can send again at 00:00 UTC on "
                           f"1 {first:%B} (in ")


def test_last_months_cost_does_not_count(alice, conversation):
    defaults(cost_per_month=Decimal("1.00"))
    last_month = timezone.now().date().replace(day=1) - dt.timedelta(days=1)
    UsageDay.objects.create(user=alice, day=last_month, cost=Decimal("100"))
    assert limits.usage_of(alice).month.cost == 0
    send(alice, conversation)


def test_the_reason_given_is_the_limit_that_lasts_longest(alice, conversation):
    defaults(messages_per_minute=1, cost_per_month=Decimal("0.50"))
    record(conversation, input=1_000_000)
    UserLimits.objects.create(user=alice, cost_per_month=0)  # alice: no money limit, the minute's stays
    send(alice, conversation)
    assert "in the last minute" in refused(alice, conversation)
    UserLimits.objects.filter(user=alice).update(cost_per_month=None)  # the default's money limit again
    assert "this month" in refused(alice, conversation)


# ---------------------------------------------------------------- defaults and overrides


def test_a_users_own_limit_beats_the_default_and_an_empty_one_keeps_it(alice, bob, conversation):
    bobs = Conversation.objects.create(owner=bob)
    session_start(conversation=bobs)
    defaults(messages_per_day=1, messages_per_minute=10)
    UserLimits.objects.create(user=alice, messages_per_day=3)
    assert limits.limits_for(alice) == limits.Limits(messages_per_minute=10, messages_per_day=3)
    for _ in range(3):
        send(alice, conversation)
    assert "your daily limit of 3" in refused(alice, conversation)
    send(bob, bobs)
    assert "your daily limit of 1" in refused(bob, bobs)
    UserLimits.objects.create(user=bob, messages_per_day=0)  # no limit for bob
    send(bob, bobs)


# ---------------------------------------------------------------- every path that queues a turn


def test_regenerate_edit_and_retry_are_limited_too(alice, conversation, eager_simulator,
                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        turn = send(alice, conversation, "first")
    turn.refresh_from_db()
    assert turn.status == "done"
    defaults(messages_per_day=1)
    for action in (lambda: turn_regenerate(user=alice, conversation_id=conversation.id),
                   lambda: turn_edit(user=alice, conversation_id=conversation.id, text="edited")):
        with pytest.raises(TurnRejected, match="your daily limit of 1"):
            action()
    Turn.objects.filter(id=turn.id).update(status="failed")
    with pytest.raises(TurnRejected, match="your daily limit of 1"):
        turn_retry(user=alice, conversation_id=conversation.id)
    # A failed turn whose message never entered the history is retried by sending its text again.
    other = Conversation.objects.create(owner=alice)
    session_start(conversation=other)
    Turn.objects.create(conversation=other, text="never started", status="failed")
    with pytest.raises(TurnRejected, match="your daily limit of 1"):
        turn_retry(user=alice, conversation_id=other.id)
    assert Turn.objects.count() == 2
    defaults(messages_per_day=2)  # one more: regenerate goes and counts
    with django_capture_on_commit_callbacks(execute=True):
        Turn.objects.filter(id=turn.id).update(status="done")
        turn_regenerate(user=alice, conversation_id=conversation.id)
    assert UsageDay.objects.get(user=alice).messages == 2


def test_a_real_turn_counts_its_model_calls_for_its_owner(alice, conversation, eager_simulator,
                                                          django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        send(alice, conversation, "hello there")
    calls = ApiCall.objects.filter(conversation=conversation)
    assert calls.exists()
    day = UsageDay.objects.get(user=alice)
    assert day.messages == 1 and day.calls == calls.count()
    assert day.input_tokens == sum(c.prompt_tokens for c in calls) > 0
    assert day.output_tokens == sum(c.output_tokens for c in calls) > 0
    assert day.cost == sum(c.cost for c in calls) > 0


def test_deleting_a_conversation_does_not_give_its_use_back(alice, conversation):
    defaults(messages_per_day=1)
    send(alice, conversation)
    Turn.objects.update(status="done")
    conversation.delete()
    other = Conversation.objects.create(owner=alice)
    session_start(conversation=other)
    assert "your daily limit of 1" in refused(alice, other)


# ---------------------------------------------------------------- the composer


def test_a_refused_send_answers_422_into_the_composers_error_with_the_reset_time(client, alice, conversation):
    defaults(messages_per_minute=1)
    client.force_login(alice)
    url = reverse("conversation-send", args=[conversation.id])
    assert client.post(url, {"text": "first"}, **HTMX).status_code == 200
    response = client.post(url, {"text": "second, kept in the composer"}, **HTMX)
    body = response.content.decode()
    assert response.status_code == 422  # the composer is cleared only on a 2xx (conversation.js)
    assert response["HX-Retarget"] == "#composer-error" and response["HX-Reswap"] == "innerHTML"
    assert "You have sent 1 message in the last minute, your limit of 1 a minute; you can send again at " in body
    assert " UTC." in body
    assert list(Turn.objects.values_list("text", flat=True)) == ["first"]


def test_without_javascript_a_refused_send_comes_back_in_the_composer_once_and_escaped(client, alice, conversation):
    defaults(messages_per_minute=1)
    client.force_login(alice)
    url = reverse("conversation-send", args=[conversation.id])
    assert client.post(url, {"text": "first"}).status_code == 302
    text = "second </textarea><script>alert(1)</script> & more"
    response = client.post(url, {"text": text}, follow=True)
    body = response.content.decode()
    assert response.status_code == 200 and "your limit of 1 a minute" in body  # the flash
    assert "&lt;/textarea&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; more</textarea>" in body
    assert "<script>alert(1)" not in body
    again = client.get(reverse("conversation", args=[conversation.id])).content.decode()
    assert "alert(1)" not in again  # given back once, not kept
    assert list(Turn.objects.values_list("text", flat=True)) == ["first"]


def test_without_javascript_an_unknown_command_comes_back_in_the_composer(client, alice, conversation):
    client.force_login(alice)
    response = client.post(reverse("conversation-send", args=[conversation.id]), {"text": "/frobnicate now"}, follow=True)
    body = response.content.decode()
    assert "/frobnicate is not a command here" in body
    assert ">/frobnicate now</textarea>" in body
    assert not Turn.objects.exists()


# ---------------------------------------------------------------- the admin


@pytest.fixture
def admin_client(client, django_user_model):
    from tests.conftest import user

    client.force_login(user(django_user_model, "root", "root-password-1", is_staff=True, is_superuser=True))
    return client


def test_the_defaults_page_opens_the_one_row_and_every_field_has_help(admin_client):
    response = admin_client.get(reverse("admin:agent_sessions_limitdefaults_changelist"))
    assert response.status_code == 302
    page = admin_client.get(response["Location"]).content.decode()
    for name in ("messages_per_minute", "messages_per_day", "input_tokens_per_day", "output_tokens_per_day",
                 "cost_per_month"):
        assert f'id="id_{name}_helptext"' in page
    assert "Empty or 0: no limit." in page


def test_the_admin_refuses_a_value_out_of_range_naming_the_range(admin_client):
    url = reverse("admin:agent_sessions_limitdefaults_change", args=[LimitDefaults.load().pk])
    response = admin_client.post(url, {"messages_per_minute": "20000", "messages_per_day": "-1",
                                       "input_tokens_per_day": "lots", "output_tokens_per_day": "",
                                       "cost_per_month": "1.234"})
    page = response.content.decode()
    assert response.status_code == 200
    assert "Enter a whole number from 0 to 10,000. Empty or 0: no limit." in page
    assert "Enter a whole number from 0 to 1,000,000. Empty or 0: no limit." in page
    assert "Enter a whole number from 0 to 10,000,000,000. Empty or 0: no limit." in page
    assert "Enter an amount of US dollars from 0 to 1,000,000, with at most two decimals." in page
    assert LimitDefaults.load().messages_per_minute is None


def test_saving_limits_in_the_admin_is_audited(admin_client, alice):
    url = reverse("admin:agent_sessions_limitdefaults_change", args=[LimitDefaults.load().pk])
    response = admin_client.post(url, {"messages_per_minute": "20", "messages_per_day": "", "input_tokens_per_day": "",
                                       "output_tokens_per_day": "", "cost_per_month": "5.00"})
    assert response.status_code == 302
    assert limits.limits_for(alice) == limits.Limits(messages_per_minute=20, cost_per_month=Decimal("5.00"))
    trail = {(c.group, c.field, c.old_value, c.new_value, c.username) for c in SettingsChange.objects.all()}
    assert trail == {("limits", "messages_per_minute", "", "20", "root"), ("limits", "cost_per_month", "", "5.00", "root")}
    add = admin_client.post(reverse("admin:agent_sessions_userlimits_add"), {
        "user": alice.pk, "messages_per_minute": "0", "messages_per_day": "", "input_tokens_per_day": "",
        "output_tokens_per_day": "", "cost_per_month": ""})
    assert add.status_code == 302
    assert limits.limits_for(alice) == limits.Limits(cost_per_month=Decimal("5.00"))
    assert SettingsChange.objects.filter(group="limits.alice", field="messages_per_minute", new_value="0").exists()
    listing = admin_client.get(reverse("admin:agent_sessions_userlimits_changelist")).content.decode()
    assert "no limit" in listing and "default" in listing


def test_the_users_limits_pages_render(admin_client, alice):
    assert admin_client.get(reverse("admin:agent_sessions_userlimits_add")).status_code == 200
    row = UserLimits.objects.create(user=alice, messages_per_day=4)
    page = admin_client.get(reverse("admin:agent_sessions_userlimits_change", args=[row.pk])).content.decode()
    assert "Empty: the default limit applies; 0: no limit for this user." in page
    admin_client.post(reverse("admin:agent_sessions_userlimits_delete", args=[row.pk]), {"post": "yes"})
    assert not UserLimits.objects.exists()
    assert SettingsChange.objects.filter(group="limits.alice", field="messages_per_day", old_value="4",
                                         new_value="").exists()


@pytest.mark.django_db(transaction=True)
def test_the_migration_counts_the_use_stored_before_it(alice, bob):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from sessions.services import recall

    executor = MigrationExecutor(connection)
    before, after = [("agent_sessions", "0012_sharelink")], [("agent_sessions", "0013_user_limits")]
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        Conv, Call, OldTurn = (old.get_model("agent_sessions", name) for name in ("Conversation", "ApiCall", "Turn"))
        a, b = Conv.objects.create(owner_id=alice.id), Conv.objects.create(owner_id=bob.id)
        yesterday = timezone.now() - dt.timedelta(days=1)
        Call.objects.create(conversation=a, provider="simulator", model="m", prompt_tokens=100, output_tokens=10,
                            cost=Decimal("0.5"))
        Call.objects.create(conversation=a, provider="simulator", model="m", prompt_tokens=40, output_tokens=4,
                            cost=Decimal("0.25"), purpose="compression")
        Call.objects.create(conversation=b, provider="simulator", model="m", prompt_tokens=7, created_at=yesterday)
        for _ in range(3):
            OldTurn.objects.create(conversation=a, text="x")
        executor.loader.build_graph()
        executor.migrate(after)
        today = timezone.now().date()
        mine = UsageDay.objects.get(user=alice, day=today)
        assert (mine.messages, mine.calls, mine.input_tokens, mine.output_tokens, mine.cost) == (3, 2, 140, 14,
                                                                                               Decimal("0.75"))
        assert (mine.summariser_input_tokens, mine.summariser_output_tokens) == (40, 4)
        assert UsageDay.objects.get(user=bob).day == yesterday.date()
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        recall.index_ensure_after_migrate(sender=None, using="default")
