"""Use against limits on the pages: the user's own Usage page (their figures only, today and this
month, login required), the staff dashboard's table of every user, and the /metrics lines."""
from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.urls import reverse

from llm.usage import Usage
from sessions.models import Conversation, LimitDefaults, UserLimits
from sessions.services.context import session_active, session_start
from sessions.services.turns import turn_submit
from sessions.services.usage import usage_record
from tests.conftest import user

pytestmark = pytest.mark.django_db


def conversation_of(owner) -> Conversation:
    c = Conversation.objects.create(owner=owner, provider="simulator", model="sim-claude-64k")
    session_start(conversation=c)
    return c


def use(owner, *, messages: int, purpose_tokens: dict[str, Usage]) -> Conversation:
    c = conversation_of(owner)
    for i in range(messages):
        turn_submit(user=owner, conversation_id=c.id, text=f"message {i}")
    for purpose, usage in purpose_tokens.items():
        usage_record(conversation_id=c.id, session_id=session_active(c).id, usage=usage, model="sim-claude-64k",
                     provider="simulator", purpose=purpose)
    return c


@pytest.fixture
def figures(alice, bob):
    """alice: 3 messages, 12,345 input tokens (2,000 of them the summariser's), 678 output; bob:
    7 messages and 987,654 input tokens. Defaults: 50 messages a day; alice's own: 5 a day."""
    use(alice, messages=3, purpose_tokens={"agent": Usage(input=10_345, output=600),
                                           "compression": Usage(input=2_000, output=78)})
    use(bob, messages=7, purpose_tokens={"agent": Usage(input=987_654, output=4_321)})
    row = LimitDefaults.load()
    row.messages_per_day, row.input_tokens_per_day = 50, 1_000_000
    row.save()
    UserLimits.objects.create(user=alice, messages_per_day=5, cost_per_month=Decimal("2.00"))


def cell(html: str, table: str, line: str) -> str:
    """The text of one row of a usage table (tags dropped, spaces collapsed)."""
    section = html[html.index(f'id="{table}"'):]
    row = re.search(rf'<tr data-line="{line}"[^>]*>(.*?)</tr>', section, re.S).group(0)
    return " ".join(re.sub(r"<[^>]+>", " ", row).split())


def test_the_usage_page_needs_a_login(client):
    response = client.get(reverse("usage"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_the_usage_page_shows_the_users_own_figures_against_their_limits(client, alice, figures):
    client.force_login(alice)
    html = client.get(reverse("usage")).content.decode()
    assert cell(html, "usage-today", "messages_per_day").startswith("Messages today 3 5 ")
    assert "near the limit" not in cell(html, "usage-today", "messages_per_day")
    assert cell(html, "usage-today", "input_tokens_per_day").startswith(
        "Input tokens today (of which the summariser and titles: 2,000) 12,345 1,000,000")
    assert cell(html, "usage-today", "output_tokens_per_day").startswith(
        "Output tokens today (of which the summariser and titles: 78) 678 no limit")
    assert cell(html, "usage-today", "messages_per_minute").startswith("Messages in the last minute 3 no limit")
    assert cell(html, "usage-month", "messages_month").startswith("Messages this month 3")
    assert cell(html, "usage-month", "cost_per_month").startswith("Cost this month $0.05 $2.00")
    assert "resets at 00:00 UTC on 1 " in cell(html, "usage-month", "cost_per_month")
    # bob's figures are nowhere on alice's page, and the page takes no user to show.
    assert "987,654" not in html and "bob" not in html
    assert "987,654" not in client.get(reverse("usage") + "?user=bob").content.decode()


def test_the_usage_page_says_when_a_limit_is_reached(client, alice, figures):
    for i in range(2):
        turn_submit(user=alice, conversation_id=Conversation.objects.filter(owner=alice).first().id, text=f"more {i}")
    client.force_login(alice)
    html = client.get(reverse("usage")).content.decode()
    row = cell(html, "usage-today", "messages_per_day")
    assert row.startswith("Messages today 5 5 ") and "limit reached" in row and "resets at 00:00 UTC on " in row
    assert 'data-line="messages_per_day" data-state="reached"' in html


def test_a_user_without_limits_is_told_so(client, bob):
    client.force_login(bob)
    html = client.get(reverse("usage")).content.decode()
    assert 'id="no-limits"' in html and "no limit" in cell(html, "usage-today", "messages_per_day")


def test_the_account_menu_links_to_the_usage_page(client, alice):
    client.force_login(alice)
    assert f'href="{reverse("usage")}"' in client.get(reverse("home")).content.decode()


@pytest.fixture
def staff_client(client, django_user_model):
    client.force_login(user(django_user_model, "root", "root-password-1", is_staff=True, is_superuser=True))
    return client


def test_the_staff_dashboard_lists_every_users_use_against_their_limits(staff_client, figures, alice):
    for i in range(2):
        turn_submit(user=alice, conversation_id=Conversation.objects.filter(owner=alice).first().id, text=f"more {i}")
    html = staff_client.get(reverse("staff:dashboard")).content.decode()
    table = html[html.index('id="usage-table"'):]
    alice_row = re.search(r'<tr data-user="alice" data-reached="messages_per_day">(.*?)</tr>', table, re.S).group(1)
    assert re.search(r'data-figure="messages_per_day">5 <small class="muted">/ 5</small> <strong class="badge">limit '
                     r'reached</strong>', alice_row)
    assert 'data-figure="input_tokens_per_day">12,345 <small class="muted">/ 1,000,000</small>' in alice_row
    assert "(own limits)" in alice_row
    bob_row = re.search(r'<tr data-user="bob">(.*?)</tr>', table, re.S).group(1)
    assert ('data-figure="input_tokens_per_day">987,654 <small class="muted">/ 1,000,000</small> '
            '<span class="badge">near</span>') in bob_row
    assert 'data-figure="messages_per_day">7 <small class="muted">/ 50</small>' in bob_row
    assert '1 user at a limit.' in html


def test_metrics_give_each_users_use_and_limits(staff_client, figures):
    text = staff_client.get("/metrics").content.decode()
    lines = set(text.splitlines())
    assert 'hermes_user_messages_today{user="alice"} 3.0' in lines
    assert 'hermes_user_messages_today{user="bob"} 7.0' in lines
    assert 'hermes_user_input_tokens_today{user="alice"} 12345.0' in lines
    assert 'hermes_user_output_tokens_today{user="bob"} 4321.0' in lines
    assert 'hermes_user_limit{limit="messages_per_day",user="alice"} 5.0' in lines
    assert 'hermes_user_limit{limit="messages_per_day",user="bob"} 50.0' in lines
    assert 'hermes_user_limit{limit="cost_per_month",user="alice"} 2.0' in lines
    assert not any(line.startswith('hermes_user_limit{limit="cost_per_month",user="bob"}') for line in lines)
    assert "hermes_users_at_limit 0.0" in lines
    assert "# TYPE hermes_user_cost_month_usd gauge" in lines
