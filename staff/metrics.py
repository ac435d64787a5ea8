"""Prometheus text exposition (format 0.0.4), written by hand: no client library.

``render(snapshot)`` turns ``staff.selectors.metrics_snapshot()`` into the exposition text. Every
family has HELP and TYPE lines; label values escape backslash, double quote and newline; HELP text
escapes backslash and newline. Counters are totals read from the database, so they only go down if
rows are deleted (Prometheus treats that as a reset).
"""
from __future__ import annotations

import math
from decimal import Decimal

from staff.selectors import FAILED_STATUSES, STATUSES, TRIGGERS

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def escape_label_value(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value.normalize(), "f") if value.is_finite() else format_value(float(value))
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


class Exposition:
    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples) -> None:
        """``samples``: a number, or an iterable of (labels dict, number)."""
        self._lines.append(f"# HELP {name} {escape_help(help_text)}")
        self._lines.append(f"# TYPE {name} {kind}")
        if not isinstance(samples, (list, tuple)):
            samples = [({}, samples)]
        for labels, value in samples:
            if labels:
                body = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels.items())
                self._lines.append(f"{name}{{{body}}} {format_value(value)}")
            else:
                self._lines.append(f"{name} {format_value(value)}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def render(snapshot: dict) -> str:
    out = Exposition()
    counts: dict[tuple[str, str], int] = dict(snapshot["compressions"])
    # Every known (status, trigger) pair is exposed, zero included, so rate() works from the start.
    for status in STATUSES:
        for trigger in TRIGGERS:
            counts.setdefault((status, trigger), 0)
    out.family("hermes_compressions_total", "counter",
               "Compression events by final status and trigger (skipped = already compressing).",
               [({"status": s, "trigger": t}, n) for (s, t), n in sorted(counts.items())])
    out.family("hermes_compression_failures_total", "counter",
               "Compressions that failed (summary failure or error); the messages were kept unchanged.",
               sum(n for (s, _), n in counts.items() if s in FAILED_STATUSES))
    sessions = snapshot["sessions"]
    out.family("hermes_sessions_active", "gauge", "Active (not ended) sessions.", sessions["active"] or 0)
    out.family("hermes_sessions_in_cooldown", "gauge",
               "Active sessions whose automatic compression waits for a cooldown to end.", sessions["cooldown"] or 0)
    out.family("hermes_sessions_antithrash_blocked", "gauge",
               "Active sessions where automatic compression stopped after 2 ineffective compressions in a row.",
               sessions["antithrash"] or 0)
    cache = snapshot["cache"]
    out.family("hermes_agent_calls_total", "counter", "Successful agent model calls.", cache["calls"])
    out.family("hermes_prompt_tokens_total", "counter",
               "Prompt tokens (input + cache read + cache write) of successful agent calls.", cache["prompt"])
    out.family("hermes_cache_read_tokens_total", "counter",
               "Prompt tokens read from the prompt cache by successful agent calls.", cache["read"])
    out.family("hermes_cache_write_tokens_total", "counter",
               "Prompt tokens written to the prompt cache by successful agent calls.", cache["write"])
    out.family("hermes_cache_hit_ratio", "gauge",
               "Token-weighted cache hit ratio of agent calls: cache read tokens / prompt tokens (0 without calls).",
               cache["hit_ratio"])
    purposes = dict(cache["by_purpose"])
    for purpose in ("agent", "compression"):
        purposes.setdefault(purpose, {"cost": Decimal(0), "calls": 0})
    out.family("hermes_cost_usd_total", "counter", "Cost of model calls in US dollars, by purpose.",
               [({"purpose": p}, v["cost"]) for p, v in sorted(purposes.items())])
    out.family("hermes_cost_saved_usd_total", "counter",
               "US dollars saved by prompt caching on agent calls (cost without cache minus cost).", cache["saved"])
    out.family("hermes_conversations_total", "gauge", "Conversations stored.", snapshot["conversations"])
    return out.text()
