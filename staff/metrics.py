"""/metrics: the staff figures as a ``prometheus_client`` collector, in the Prometheus text format 0.0.4.

``HermesCollector.collect()`` reads ``staff.selectors.metrics_snapshot()`` at every scrape and
yields one metric family per figure; the library writes the text (HELP/TYPE lines, label and HELP
escaping, number formatting). The collector lives in its own ``CollectorRegistry``, never the
library's global one, so the output holds these figures only: no process or platform metrics, and
nothing another module registers.

Counters are totals read from the database, so they only go down if rows are deleted (Prometheus
treats that as a reset). A counter family named ``x`` is exposed as ``x_total``; the stored
conversation count is a gauge (rows can be deleted) whose exposed name, ``hermes_conversations_total``,
is kept as it has always been.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from sessions.models_limits import LIMIT_FIELDS
from staff import selectors
from staff.selectors import ANTI_THRASH_LIMIT, FAILED_STATUSES, STATUSES, TRIGGERS

# What generate_latest writes (legacy names, underscore escaping). The library's
# CONTENT_TYPE_LATEST announces the text format 1.0.0 since prometheus_client 0.22.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

_PURPOSES = ("agent", "compression")


def _counter(name: str, help_text: str, value) -> CounterMetricFamily:
    return CounterMetricFamily(name, help_text, value=float(value))


def _gauge(name: str, help_text: str, value) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, value=float(value))


def families(snapshot: dict) -> Iterator[Metric]:
    """The metric families of one ``metrics_snapshot()``."""
    counts: dict[tuple[str, str], int] = dict(snapshot["compressions"])
    # Every known (status, trigger) pair is exposed, zero included, so rate() works from the start.
    for status in STATUSES:
        for trigger in TRIGGERS:
            counts.setdefault((status, trigger), 0)
    compressions = CounterMetricFamily(
        "hermes_compressions", "Compression events by final status and trigger (skipped = already compressing, or a repeated request).",
        labels=("status", "trigger"))
    for (status, trigger), n in sorted(counts.items()):
        compressions.add_metric((status, trigger), float(n))
    yield compressions
    yield _counter("hermes_compression_failures",
                   "Compressions that failed (summary failure or error); the messages were kept unchanged.",
                   sum(n for (s, _), n in counts.items() if s in FAILED_STATUSES))

    sessions = snapshot["sessions"]
    yield _gauge("hermes_sessions_active", "Active (not ended) sessions.", sessions["active"] or 0)
    yield _gauge("hermes_sessions_in_cooldown",
                 "Active sessions whose automatic compression waits for a cooldown to end.", sessions["cooldown"] or 0)
    yield _gauge("hermes_sessions_antithrash_blocked",
                 f"Active sessions where automatic compression stopped after {ANTI_THRASH_LIMIT} ineffective "
                 "compressions in a row.",
                 sessions["antithrash"] or 0)

    cache = snapshot["cache"]
    yield _counter("hermes_agent_calls", "Successful agent model calls.", cache["calls"])
    yield _counter("hermes_prompt_tokens",
                   "Prompt tokens (input + cache read + cache write) of successful agent calls.", cache["prompt"])
    yield _counter("hermes_cache_read_tokens",
                   "Prompt tokens read from the prompt cache by successful agent calls.", cache["read"])
    yield _counter("hermes_cache_write_tokens",
                   "Prompt tokens written to the prompt cache by successful agent calls.", cache["write"])
    yield _gauge("hermes_cache_hit_ratio",
                 "Token-weighted cache hit ratio of agent calls: cache read tokens / prompt tokens (0 without calls).",
                 cache["hit_ratio"])
    purposes = dict(cache["by_purpose"])
    for purpose in _PURPOSES:
        purposes.setdefault(purpose, {"cost": Decimal(0), "calls": 0})
    cost = CounterMetricFamily("hermes_cost_usd", "Cost of model calls in US dollars, by purpose.",
                               labels=("purpose",))
    for purpose, figures in sorted(purposes.items()):
        cost.add_metric((purpose,), float(figures["cost"]))
    yield cost
    yield _counter("hermes_cost_saved_usd",
                   "US dollars saved by prompt caching on agent calls (cost without cache minus cost).", cache["saved"])
    yield _gauge("hermes_conversations_total", "Conversations stored.", snapshot["conversations"])
    levels = GaugeMetricFamily(
        "hermes_conversations_by_pressure",
        "Recently active conversations by context pressure: the projected next request against the compression "
        "threshold (ok, warn = one more turn could cross it, high, critical = past gateway hygiene).",
        labels=("level",))
    for level, n in snapshot.get("pressure", {}).items():
        levels.add_metric((level,), float(n))
    yield levels
    if "usage" in snapshot:
        yield from usage_families(snapshot["usage"])


# Per-user figures: (name, help, the row's attribute).
_USER_FIGURES = (
    ("hermes_user_messages_today", "Messages the user sent today (UTC).", "messages_today"),
    ("hermes_user_input_tokens_today",
     "Input tokens of the user's model calls today (UTC), the summariser's included.", "input_tokens_today"),
    ("hermes_user_output_tokens_today",
     "Output tokens of the user's model calls today (UTC), the summariser's included.", "output_tokens_today"),
    ("hermes_user_cost_month_usd", "US dollars the user's model calls cost this month (UTC).", "cost_month"),
)


def usage_families(usage: dict) -> Iterator[Metric]:
    """Use and limits per user (``limits_usage.usage_overview``: the users who used the app this
    month or have limits of their own, the highest cost first, at most its limit). A per-user
    family without a sample (no such user, no limit set) is left out."""
    for name, help_text, attribute in _USER_FIGURES:
        family = GaugeMetricFamily(name, help_text, labels=("user",))
        for row in usage["rows"]:
            family.add_metric((row.username,), float(getattr(row, attribute)))
        if family.samples:
            yield family
    limits = GaugeMetricFamily("hermes_user_limit",
                               "The limits in force for the user, by limit (absent: no limit; days and months UTC).",
                               labels=("user", "limit"))
    for row in usage["rows"]:
        for field in LIMIT_FIELDS:
            value = getattr(row.limits, field)
            if value is not None:
                limits.add_metric((row.username, field), float(value))
    if limits.samples:
        yield limits
    yield _gauge("hermes_users_at_limit",
                 "Users who have reached a daily or monthly limit (messages, tokens or money) and cannot send now.",
                 usage["at_limit"])


class HermesCollector(Collector):
    """Yields the families of a fresh snapshot at every collect (every scrape)."""

    def __init__(self, snapshot: Callable[[], dict] | None = None) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        # Looked up at collect time, not bound at import, so the selector is always the current one.
        yield from families(self._snapshot() if self._snapshot else selectors.metrics_snapshot())


registry = CollectorRegistry()
registry.register(HermesCollector())  # no describe(): registering runs no query


def render(snapshot: dict | None = None) -> str:
    """The exposition text of ``snapshot``, or of a fresh ``metrics_snapshot()`` when None."""
    if snapshot is None:
        return generate_latest(registry).decode()
    once = CollectorRegistry()
    once.register(HermesCollector(lambda: snapshot))
    return generate_latest(once).decode()
