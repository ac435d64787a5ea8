from __future__ import annotations

import re

import pytest

from staff.metrics import Exposition, escape_label_value, render

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


def test_it_escapes_label_values():
    assert escape_label_value('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    out = Exposition()
    out.family("x_total", "counter", "Help with a \\ backslash\nand a newline.", [({"k": 'say "hi"'}, 2)])
    assert out.text() == ('# HELP x_total Help with a \\\\ backslash\\nand a newline.\n'
                          '# TYPE x_total counter\n'
                          'x_total{k="say \\"hi\\""} 2\n')


def test_it_renders_an_empty_installation():
    from decimal import Decimal

    text = render({"compressions": {}, "sessions": {"active": 0, "cooldown": 0, "antithrash": 0},
                   "cache": {"calls": 0, "prompt": 0, "read": 0, "write": 0, "hit_ratio": 0.0, "by_purpose": {},
                             "saved": Decimal("0")}, "conversations": 0})
    samples, _, _ = parse(text)
    assert samples["hermes_cache_hit_ratio"] == 0.0
    assert samples['hermes_cost_usd_total{purpose="agent"}'] == 0
    assert samples["hermes_compression_failures_total"] == 0
