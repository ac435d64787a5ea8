from __future__ import annotations

import re

import pytest
from prometheus_client.parser import text_string_to_metric_families

from staff.metrics import render

pytestmark = pytest.mark.django_db

URL = "/metrics"
TOKEN = "s3cret-metrics-token"
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')


def parse(text: str) -> tuple[dict[str, float], dict[str, str], set[str]]:
    """{"name{labels}": value}, {family: TYPE}, families with a HELP line."""
    samples, types, helps = {}, {}, set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helps.add(line.split()[2])
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not an exposition line: {line!r}"
            samples[m.group(1) + (m.group(2) or "")] = float(m.group(4))
    return samples, types, helps


def test_it_exposes_the_dashboard_figures_to_staff(staff_client, scenario):
    response = staff_client.get(URL)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples, types, helps = parse(response.content.decode())
    assert samples['hermes_compressions_total{status="compressed",trigger="preflight"}'] == 2
    assert samples['hermes_compressions_total{status="compressed",trigger="manual"}'] == 1
    assert samples['hermes_compressions_total{status="skipped",trigger="manual"}'] == 1
    assert samples['hermes_compressions_total{status="failed",trigger="hygiene"}'] == 1
    assert samples['hermes_compressions_total{status="compressed",trigger="admin"}'] == 0  # zero series exist
    assert samples["hermes_compression_failures_total"] == 2
    assert samples["hermes_sessions_in_cooldown"] == 1
    assert samples["hermes_sessions_antithrash_blocked"] == 1
    assert samples["hermes_sessions_active"] == 3
    assert samples["hermes_cache_read_tokens_total"] == 3000
    assert samples["hermes_prompt_tokens_total"] == 4000
    assert samples["hermes_cache_hit_ratio"] == 0.75
    assert samples["hermes_cost_saved_usd_total"] == pytest.approx(0.045)
    assert samples['hermes_cost_usd_total{purpose="agent"}'] == pytest.approx(0.030)
    assert samples['hermes_cost_usd_total{purpose="compression"}'] == pytest.approx(0.5)
    assert samples["hermes_conversations_total"] == 3
    families = {name.split("{")[0] for name in samples}
    assert families == set(types) == helps  # every family has HELP and TYPE
    assert types["hermes_compressions_total"] == "counter" and types["hermes_sessions_in_cooldown"] == "gauge"


def test_it_sums_the_compression_series_to_the_dashboard_totals(staff_client, scenario):
    samples, _, _ = parse(staff_client.get(URL).content.decode())
    compressed = sum(v for k, v in samples.items() if k.startswith('hermes_compressions_total{status="compressed"'))
    assert compressed == scenario["by_status"]["compressed"]


def test_it_refuses_a_user_who_is_not_staff(client, alice):
    client.force_login(alice)
    assert client.get(URL).status_code == 403


def test_it_refuses_an_anonymous_request_without_redirecting(client, settings):
    settings.HERMES_METRICS_TOKEN = TOKEN
    response = client.get(URL)
    assert response.status_code == 403
    assert TOKEN not in response.content.decode()


def test_it_accepts_the_bearer_token(client, settings, scenario):
    settings.HERMES_METRICS_TOKEN = TOKEN
    response = client.get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert "hermes_cache_hit_ratio 0.75" in response.content.decode()
    assert TOKEN not in response.content.decode()


def test_it_refuses_a_wrong_token(client, settings):
    settings.HERMES_METRICS_TOKEN = TOKEN
    for header in (f"Bearer {TOKEN}x", "Bearer wrong", f"Basic {TOKEN}", TOKEN, "Bearer "):
        response = client.get(URL, HTTP_AUTHORIZATION=header)
        assert response.status_code == 403, header
        assert TOKEN not in response.content.decode()


def test_it_refuses_every_token_when_none_is_configured(client, settings, alice):
    settings.HERMES_METRICS_TOKEN = ""
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer ").status_code == 403
    assert client.get(URL, HTTP_AUTHORIZATION="Bearer anything").status_code == 403


def test_it_renders_an_empty_installation():
    from decimal import Decimal

    text = render({"compressions": {}, "sessions": {"active": 0, "cooldown": 0, "antithrash": 0},
                   "cache": {"calls": 0, "prompt": 0, "read": 0, "write": 0, "hit_ratio": 0.0, "by_purpose": {},
                             "saved": Decimal("0")}, "conversations": 0})
    samples, _, _ = parse(text)
    assert samples["hermes_cache_hit_ratio"] == 0.0
    assert samples['hermes_cost_usd_total{purpose="agent"}'] == 0
    assert samples["hermes_compression_failures_total"] == 0


def _families(text: str) -> dict:
    """{family name: Metric} as prometheus_client's own parser reads the exposition."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def _value(family, **labels) -> float:
    (value,) = [s.value for s in family.samples if s.labels == labels]
    return value


def test_the_library_parser_reads_the_figures_the_database_holds(staff_client, scenario):
    from django.db.models import Sum

    from sessions.models import ApiCall, CompressionEvent, Conversation

    families = _families(staff_client.get(URL).content.decode())
    compressions = families["hermes_compressions"]
    assert compressions.type == "counter" and {s.name for s in compressions.samples} == {"hermes_compressions_total"}
    for status in {"compressed", "failed", "skipped", "aborted", "noop"}:
        for trigger in {"preflight", "manual", "hygiene", "post_response"}:
            stored = CompressionEvent.objects.filter(status=status, trigger=trigger).count()
            assert _value(compressions, status=status, trigger=trigger) == stored, (status, trigger)
    assert _value(families["hermes_compression_failures"]) == CompressionEvent.objects.filter(status="failed").count()
    conversations = families["hermes_conversations_total"]
    assert conversations.type == "gauge"  # exposed under its historical name, not hermes_conversations_total_total
    assert _value(conversations) == Conversation.objects.count()
    compression_cost = ApiCall.objects.filter(purpose="compression").aggregate(c=Sum("cost"))["c"]
    assert _value(families["hermes_cost_usd"], purpose="compression") == pytest.approx(float(compression_cost))
    agent = ApiCall.objects.filter(purpose="agent", error="").aggregate(p=Sum("prompt_tokens"), r=Sum("cache_read_tokens"))
    assert _value(families["hermes_cache_hit_ratio"]) == pytest.approx(agent["r"] / agent["p"])


def test_it_exposes_its_own_registry_only(staff_client, scenario):
    # The library's global registry would add process_*, python_gc_* and python_info.
    for text in (staff_client.get(URL).content.decode(), render()):
        families = _families(text)
        assert families and all(name.startswith("hermes_") for name in families), sorted(families)


def test_every_collect_reads_the_database_again(scenario, alice):
    from tests.staff import builders as b

    before = _value(_families(render())["hermes_conversations_total"])
    b.conversation(alice, title="Delta")
    assert _value(_families(render())["hermes_conversations_total"]) == before + 1


def test_label_values_survive_quotes_backslashes_and_newlines():
    from decimal import Decimal

    odd = 'say "hi" \\ then\nstop'
    text = render({"compressions": {(odd, "manual"): 2}, "sessions": {"active": 0, "cooldown": 0, "antithrash": 0},
                   "cache": {"calls": 0, "prompt": 0, "read": 0, "write": 0, "hit_ratio": 0.0, "by_purpose": {},
                             "saved": Decimal("0")}, "conversations": 0})
    assert 'status="say \\"hi\\" \\\\ then\\nstop"' in text  # one line, escaped
    assert _value(_families(text)["hermes_compressions"], status=odd, trigger="manual") == 2
