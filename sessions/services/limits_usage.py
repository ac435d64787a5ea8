"""Use against limits, as the pages show it: one user's own (their Usage page) and every user's
(the staff dashboard and /metrics). The figures are the ones the limits are checked against
(``sessions.services.limits``): today and this month are UTC calendar ones."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db.models import Q, Sum
from django.utils import timezone

from sessions.models import UsageDay, UserLimits
from sessions.models_limits import utc_day
from sessions.services.limits import (
    Limits,
    dollars,
    limits_by_user,
    limits_for,
    month_start,
    next_midnight,
    next_month,
    usage_of,
    when_words,
)

NEAR = 0.8  # a line at 80 % of its limit or more reads "near the limit"
OVERVIEW_LIMIT = 200


@dataclass(frozen=True)
class Line:
    """One figure against its limit (``limit`` None: no limit)."""

    key: str
    label: str
    used: int | Decimal
    limit: int | Decimal | None
    note: str = ""
    resets: str = ""

    @property
    def money(self) -> bool:
        return isinstance(self.used, Decimal)

    def _shown(self, value) -> str:
        return dollars(value) if self.money else f"{value:,}"

    @property
    def used_text(self) -> str:
        return self._shown(self.used)

    @property
    def limit_text(self) -> str:
        return "no limit" if self.limit is None else self._shown(self.limit)

    @property
    def pct(self) -> float:
        """Share of the limit used, 0–100 (for the meter), 0 without a limit."""
        return min(100.0, round(100.0 * float(self.used) / float(self.limit), 1)) if self.limit else 0.0

    @property
    def state(self) -> str:
        if self.limit is None:
            return "none"
        if self.used >= self.limit:
            return "reached"
        return "near" if self.used >= self.limit * Decimal(str(NEAR)) else "ok"


def usage_report(user, *, now: dt.datetime | None = None) -> dict:
    """The user's lines for today and for this month, with the limits in force."""
    now = now or timezone.now()
    limits, usage = limits_for(user), usage_of(user, now=now)
    today, month = usage.today, usage.month
    midnight = f"resets at {when_words(next_midnight(now), now)}"
    month_end = f"resets at {when_words(next_month(now), now)}"

    def summariser(tokens: int) -> str:
        return f"of which the summariser and titles: {tokens:,}" if tokens else ""

    return {
        "now": now, "limits": limits, "day": utc_day(now), "month_start": month_start(utc_day(now)),
        "today": [
            Line("messages_per_minute", "Messages in the last minute", usage.last_minute, limits.messages_per_minute,
                 resets="a rolling 60-second window"),
            Line("messages_per_day", "Messages today", today.messages, limits.messages_per_day, resets=midnight),
            Line("input_tokens_per_day", "Input tokens today", today.input_tokens, limits.input_tokens_per_day,
                 note=summariser(today.summariser_input_tokens), resets=midnight),
            Line("output_tokens_per_day", "Output tokens today", today.output_tokens, limits.output_tokens_per_day,
                 note=summariser(today.summariser_output_tokens), resets=midnight),
            Line("cost_today", "Cost today", today.cost, None, note=f"{today.calls:,} model calls"),
        ],
        "month": [
            Line("messages_month", "Messages this month", month.messages, None),
            Line("input_tokens_month", "Input tokens this month", month.input_tokens, None,
                 note=summariser(month.summariser_input_tokens)),
            Line("output_tokens_month", "Output tokens this month", month.output_tokens, None,
                 note=summariser(month.summariser_output_tokens)),
            Line("cost_per_month", "Cost this month", month.cost, limits.cost_per_month, resets=month_end),
        ],
    }


@dataclass(frozen=True)
class UserRow:
    """One user's use today and this month against their limits (the staff figures)."""

    user_id: int
    username: str
    limits: Limits
    messages_today: int
    input_tokens_today: int
    output_tokens_today: int
    messages_month: int
    cost_month: Decimal
    own_limits: bool

    @property
    def lines(self) -> list[Line]:
        return [Line("messages_per_day", "Messages today", self.messages_today, self.limits.messages_per_day),
                Line("input_tokens_per_day", "Input tokens today", self.input_tokens_today,
                     self.limits.input_tokens_per_day),
                Line("output_tokens_per_day", "Output tokens today", self.output_tokens_today,
                     self.limits.output_tokens_per_day),
                Line("cost_per_month", "Cost this month", self.cost_month, self.limits.cost_per_month)]

    @property
    def reached(self) -> list[str]:
        """The daily and monthly limits this user has reached (the per-minute one is not shown here)."""
        return [line.key for line in self.lines if line.state == "reached"]


def usage_overview(*, now: dt.datetime | None = None, limit: int = OVERVIEW_LIMIT) -> dict:
    """Every user who used the app this month or has limits of their own, highest cost this month
    first (at most ``limit``), in four queries; ``total``: how many there are."""
    now = now or timezone.now()
    today = utc_day(now)
    zero = Decimal(0)
    sums = (UsageDay.objects.filter(day__gte=month_start(today), day__lte=today).order_by().values("user_id")
            .annotate(messages_today=Sum("messages", filter=Q(day=today)),
                      input_tokens_today=Sum("input_tokens", filter=Q(day=today)),
                      output_tokens_today=Sum("output_tokens", filter=Q(day=today)),
                      messages_month=Sum("messages"), cost_month=Sum("cost")))
    found = {r["user_id"]: r for r in sums}
    own = set(UserLimits.objects.values_list("user_id", flat=True))
    ids = set(found) | own
    ranked = sorted(ids, key=lambda uid: (found.get(uid, {}).get("cost_month") or zero,
                                          found.get(uid, {}).get("messages_month") or 0), reverse=True)[:limit]
    names = dict(get_user_model().objects.filter(pk__in=ranked).values_list("pk", get_user_model().USERNAME_FIELD))
    in_force = limits_by_user(ranked)
    rows = []
    for uid in ranked:
        r = found.get(uid, {})
        rows.append(UserRow(
            user_id=uid, username=names.get(uid, str(uid)), limits=in_force[uid], own_limits=uid in own,
            messages_today=r.get("messages_today") or 0, input_tokens_today=r.get("input_tokens_today") or 0,
            output_tokens_today=r.get("output_tokens_today") or 0,
            messages_month=r.get("messages_month") or 0, cost_month=r.get("cost_month") or zero))
    return {"rows": rows, "total": len(ids), "limit": limit, "day": today, "at_limit": sum(1 for r in rows if r.reached)}
