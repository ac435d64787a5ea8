from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from compression import settings_store

pytestmark = pytest.mark.django_db

URL = "/staff/"


def test_it_shows_the_token_weighted_hit_rate_and_the_money_saved(staff_client, scenario):
    response = staff_client.get(URL)
    assert response.status_code == 200
    cache = response.context["cache"]
    assert cache["hit_rate"] == scenario["hit_rate"]
    assert cache["saved"] == Decimal(scenario["saved"])
    assert cache["prompt"] == 4000 and cache["read"] == 3000 and cache["calls"] == 2
    assert cache["total_cost"] == Decimal("0.530")  # agent 0.030 + summariser 0.5; the failed call cost nothing
    html = response.content.decode()
    assert 'id="stat-hit-rate">75.0%<' in html
    assert 'id="stat-saved">$0.0450<' in html


def test_it_counts_compressions_by_status(staff_client, scenario):
    response = staff_client.get(URL)
    summary = response.context["compressions"]
    assert {s: summary["by_status"][s] for s in scenario["by_status"]} == scenario["by_status"]
    assert summary["total"] == 8
    assert summary["failures"] == 2
    preflight = next(r for r in summary["rows"] if r["trigger"] == "preflight")
    assert dict(zip(summary["statuses"], preflight["counts"]))["compressed"] == 2
    assert preflight["total"] == 3
    html = response.content.decode()
    for status, n in scenario["by_status"].items():
        assert f'id="stat-{status}">{n}<' in html


def test_it_counts_active_sessions_in_cooldown_and_blocked_by_anti_thrash(staff_client, scenario):
    response = staff_client.get(URL)
    sessions = response.context["sessions"]
    assert (sessions["active"], sessions["cooldown"], sessions["antithrash"]) == (3, 1, 1)
    flagged = {f["conversation"].title: f for f in response.context["flagged"]}
    assert set(flagged) == {"Alpha", "Bravo"}  # Charlie's cooldown is over and it had one ineffective run
    assert 0 < flagged["Alpha"]["cooldown_left"] <= 120 and not flagged["Alpha"]["blocked"]
    assert flagged["Bravo"]["blocked"] and flagged["Bravo"]["cooldown_left"] == 0
    html = response.content.decode()
    assert 'id="stat-cooldown">1<' in html and 'id="stat-antithrash">1<' in html


def test_it_shows_every_conversations_pressure_against_its_window(staff_client, scenario):
    response = staff_client.get(URL)
    pressure = response.context["pressure"]
    assert pressure["total"] == 3
    rows = {r["conversation"].title: r for r in pressure["rows"]}
    # sim-claude-200k: 150,000 / 200,000; threshold = 50 % of (200,000 − 4,096 max_tokens)
    assert (rows["Alpha"]["pct"], rows["Alpha"]["window"], rows["Alpha"]["threshold"]) == (75.0, 200_000, 97_952)
    assert rows["Alpha"]["level"] == "high" and rows["Alpha"]["cooldown_left"] > 0  # over threshold, under 85 %
    # a 100,000 override: 50 % of 95,904 is under the 64,000 floor
    assert (rows["Bravo"]["pct"], rows["Bravo"]["window"], rows["Bravo"]["threshold"]) == (50.0, 100_000, 64_000)
    assert rows["Bravo"]["blocked"] and rows["Bravo"]["owner"] == "bob"
    assert rows["Charlie"]["pct"] == 0.0 and rows["Charlie"]["level"] == "none"
    assert [r["conversation"].title for r in pressure["rows"]] == ["Alpha", "Bravo", "Charlie"]  # highest first
    html = response.content.decode()
    assert 'data-pct="75.0"' in html
    # Printed as every other page prints a count: 97,952, not 97952.
    assert 'data-label="Threshold">97,952' in html and 'data-label="Window">200,000<' in html
    assert 'data-label="Tokens">150,000<' in html and "97952" not in html.replace('"97952"', "")


def test_it_uses_a_window_lowered_by_an_overflow(staff_client, alice):
    from tests.staff import builders as b

    conv = b.conversation(alice, title="Lowered")
    b.session(conv, last_prompt_tokens=60_000, context_length=80_000)
    row = staff_client.get(URL).context["pressure"]["rows"][0]
    assert (row["window"], row["pct"]) == (80_000, 75.0)


def test_it_charts_the_figures_per_day(staff_client, scenario):
    response = staff_client.get(URL)
    days = {d["day"]: d for d in response.context["days"]}
    assert len(days) == 30
    today, yesterday = timezone.localdate(), scenario["yesterday"]
    assert (days[today]["calls"], days[today]["prompt"], days[today]["read"]) == (1, 1000, 250)
    assert days[today]["hit_rate"] == 25.0 and days[today]["saved"] == Decimal("0.015")
    assert (days[yesterday]["calls"], days[yesterday]["prompt"], days[yesterday]["read"]) == (1, 3000, 2750)
    assert days[yesterday]["saved"] == Decimal("0.030")
    assert (days[today]["compressed"], days[today]["failed"], days[today]["other"]) == (3, 1, 3)
    assert (days[yesterday]["compressed"], days[yesterday]["failed"], days[yesterday]["other"]) == (0, 1, 0)
    assert days[today - dt.timedelta(days=5)]["calls"] == 0
    chart = response.context["chart"]
    assert chart["peak_tokens"] == 3000 and len(chart["bars"]) == 30
    yesterday_bar = next(b for b in chart["bars"] if b["day"] == yesterday)
    assert yesterday_bar["h"] == 60.0  # the peak day fills the chart
    html = response.content.decode()
    assert html.count('<svg viewBox="0 0') == 2  # the two daily charts (each pressure meter is an SVG too)
    assert f'data-day="{yesterday:%Y-%m-%d}"' in html


def test_it_is_not_shown_to_a_user_who_is_not_staff(client, alice, scenario):
    client.force_login(alice)
    response = client.get(URL)
    assert response.status_code == 404
    assert b"Alpha" not in response.content


def test_it_sends_an_anonymous_visitor_to_the_login_page(client):
    response = client.get(URL)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_says_the_settings_are_feasible_by_default(staff_client):
    response = staff_client.get(URL)
    assert response.context["feasibility"].warnings == ()
    assert 'id="feasible"' in response.content.decode()


def test_it_warns_when_a_custom_aux_provider_has_no_base_url(staff_client):
    settings_store.save_group("auxiliary", {"provider": "custom", "model": "my-summariser", "base_url": ""})
    html = staff_client.get(URL).content.decode()
    assert "No usable auxiliary model" in html
    assert "auxiliary.compression.base_url is empty" in html
    assert 'id="feasible"' not in html


def test_it_warns_when_the_anthropic_aux_route_has_no_key(staff_client, settings):
    settings.ANTHROPIC_API_KEY = ""
    settings_store.save_group("auxiliary", {"provider": "anthropic", "model": "claude-haiku-4-5"})
    texts = [w.text for w in staff_client.get(URL).context["feasibility"].warnings]
    assert any("ANTHROPIC_API_KEY is not set" in t for t in texts)


def test_it_warns_about_a_small_aux_window_and_the_lowered_threshold(staff_client):
    settings_store.save_group("auxiliary", {"provider": "simulator", "model": "sim-claude-32k"})
    html = staff_client.get(URL).content.decode()
    assert "32,000-token window, below the minimum of 64,000" in html
    assert "the session threshold will be lowered to the aux window (32,000 tokens)" in html


def test_it_warns_only_about_the_lowered_threshold_when_the_aux_window_is_above_the_minimum(staff_client):
    settings_store.save_group("auxiliary", {"provider": "simulator", "model": "sim-claude-64k"})
    warnings = staff_client.get(URL).context["feasibility"].warnings
    assert [w.level for w in warnings] == ["warning"]
    assert "(97,952 tokens)" in warnings[0].text and "aux window (64,000 tokens)" in warnings[0].text


def test_it_uses_the_same_number_of_queries_however_many_conversations_there_are(staff_client, alice):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.staff import builders as b

    def add(n):
        for i in range(n):
            conv = b.conversation(alice, title=f"c{i}")
            s = b.session(conv, last_prompt_tokens=1000 + i)
            b.call(conv, prompt=100, read=50, session=s)
            b.event(conv, s, status="compressed")

    add(2)
    with CaptureQueriesContext(connection) as few:
        staff_client.get(URL)
    add(10)
    with CaptureQueriesContext(connection) as many:
        assert len(staff_client.get(URL).context["pressure"]["rows"]) == 12
    assert len(many) == len(few)
