"""The live path's cheap parts: a delta is built without the template engine, a batch of deltas
reaches each conversation's page, the gauge a turn pushes comes from the figures the loop holds,
and a socket's connect takes at most eight queries and builds no context engine."""
from __future__ import annotations

import pytest
from django.template.loader import render_to_string

from sessions import fragments, live, presenters
from sessions.services import pressure, runtime
from sessions.services.context import context_messages, context_rows, session_active
from tests.web.pushes import Page
from tests.web.test_query_counts import busy_conversation

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("text", ["plain", "<b>&\"quotes'</b>", "line\nbreak", ""])
def test_a_delta_is_the_templates_markup(text):
    assert fragments.render_stream_delta("stream-7", text) == render_to_string(
        "sessions/_stream_delta.html", {"stream_id": "stream-7", "text": text})


def test_a_batch_of_deltas_reaches_each_conversations_page_in_order(alice):
    first, second = busy_conversation(alice, "one"), busy_conversation(alice, "two")
    pages = Page(first), Page(second)
    live.stream_deltas([(first.id, "s-1", "a1"), (second.id, "s-2", "b1"), (first.id, "s-1", "a2")])
    one, two = (page.received() for page in pages)
    assert [e["kind"] for e in one] == ["delta", "delta"] and [e["kind"] for e in two] == ["delta"]
    assert ">a1<" in one[0]["html"] and ">a2<" in one[1]["html"] and ">b1<" in two[0]["html"]
    assert 'id="s-2-text"' in two[0]["html"]


class EngineBuilds:
    """Counts the context engines built (the real function still runs)."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        real = runtime.engine_build

        def counted(**kwargs):
            self.count += 1
            return real(**kwargs)

        monkeypatch.setattr(runtime, "engine_build", counted)


def test_the_gauge_from_the_loops_figures_is_the_gauge_from_the_database(alice, django_assert_max_num_queries):
    c = busy_conversation(alice)
    cfg = runtime.current_config()
    session = session_active(c)
    engine = runtime.engine_build(conversation=c, session=session, cfg=cfg)
    offered = pressure.offered_tools(cfg, engine, c)
    ids = [None, *context_rows(session).values_list("id", flat=True)]
    figures = presenters.GaugeFigures(session=session, messages=context_messages(session), offered=offered,
                                      blocked=engine.blocked_reason(), ids=ids,
                                      ratio=pressure.ratios([c.model]).get(c.model, 1.0))
    with django_assert_max_num_queries(0):
        pushed = presenters.gauge(c, cfg=cfg, figures=figures)
    assert pushed == presenters.gauge(c, cfg=cfg)
    # Without the ids and the ratio: one query for each, and still no engine.
    bare = presenters.GaugeFigures(session=session, messages=context_messages(session), offered=offered)
    with django_assert_max_num_queries(2):
        assert presenters.gauge(c, cfg=cfg, figures=bare) == pushed


def test_a_turns_gauge_push_builds_no_engine(alice, monkeypatch):
    c = busy_conversation(alice)
    cfg = runtime.current_config()
    session = session_active(c)
    offered = pressure.offered_tools(cfg, runtime.engine_build(conversation=c, session=session, cfg=cfg), c)
    page = Page(c)
    builds = EngineBuilds(monkeypatch)
    live.gauge_changed(c, cfg=cfg, figures=presenters.GaugeFigures(session=session, messages=context_messages(session),
                                                                     offered=offered))
    assert builds.count == 0
    assert [e["kind"] for e in page.received()] == ["gauge"]


def test_a_socket_connect_takes_eight_queries_and_builds_no_engine(alice, django_assert_max_num_queries, monkeypatch):
    c = busy_conversation(alice)
    from compression.models import MCPServer

    MCPServer.objects.create(name="time", command="mcp-server-time", state="connected",
                             tools=[{"name": "now", "description": "the time", "input_schema": {"type": "object"}}])
    builds = EngineBuilds(monkeypatch)
    with django_assert_max_num_queries(8):
        html = live.live_state(c)
    assert builds.count == 0
    assert 'id="gauge"' in html and 'id="cache-panel"' in html and 'data-role="summary"' in html


def test_a_connect_asks_the_engine_when_compression_may_be_paused(alice, monkeypatch):
    """A cooldown stored on the session: the engine says why compression waits."""
    import time

    c = busy_conversation(alice)
    session = session_active(c)
    session.cooldown_until = time.time() + 600
    session.save()
    builds = EngineBuilds(monkeypatch)
    g = presenters.gauge(c)
    assert builds.count == 1
    assert g["blocked"] and "cooling down" in g["blocked"]


def reference_totals(conversation) -> dict:
    """The panel's sums, aggregated the plain way (the one-query panel must agree)."""
    from django.db.models import Count, Q, Sum

    from sessions.models import ApiCall

    agent = Q(purpose="agent", error="")
    return ApiCall.objects.filter(conversation=conversation).aggregate(
        prompt=Sum("prompt_tokens", filter=agent), read=Sum("cache_read_tokens", filter=agent),
        write=Sum("cache_write_tokens", filter=agent), w5=Sum("cache_write_5m_tokens", filter=agent),
        w1h=Sum("cache_write_1h_tokens", filter=agent), agent_cost=Sum("cost", filter=agent),
        nocache=Sum("cost_without_cache", filter=agent), n=Count("id", filter=agent),
        summariser_cost=Sum("cost", filter=Q(purpose="compression")))


def reference_recent(conversation, limit: int) -> list[int]:
    from sessions.models import ApiCall

    ids = list(ApiCall.objects.filter(conversation=conversation, purpose="agent", error="")
               .order_by("-id").values_list("id", flat=True)[:limit])
    return ids[::-1]


def test_the_cache_panel_reads_the_totals_with_the_recent_calls(alice, django_assert_max_num_queries):
    from sessions import selectors
    from sessions.models import ApiCall

    c = busy_conversation(alice)
    with django_assert_max_num_queries(1):
        totals, recent = selectors.api_calls_panel(c)
    assert totals == reference_totals(c)
    assert [r.id for r in recent] == reference_recent(c, selectors.RECENT_CALLS)
    ApiCall.objects.filter(conversation=c, purpose="agent").delete()  # the summariser's cost alone
    totals, recent = selectors.api_calls_panel(c)
    assert totals == reference_totals(c) and totals["summariser_cost"] == 1 and recent == []
