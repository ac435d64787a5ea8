"""Per-user limits, checked before a turn is queued: messages per minute and per day, input and
output tokens per day, and money per calendar month. Staff set a default and per-user overrides
in the admin (``sessions.models_limits``); an empty or zero limit is no limit, and a fresh
installation has none.

``send_allowance_take`` runs inside the transaction that stores the turn. It takes the user's
lock, reads the user's use, and either refuses (``LimitReached``: the reason in words, with the
time the limit lets the user send again) or counts the message for today; the transaction then
stores the turn. Two sends of one user take the lock one after the other, so under any
concurrency exactly the allowed number pass: on PostgreSQL the lock is the user's row (SELECT …
FOR NO KEY UPDATE); on SQLite the write transaction is itself the lock (the project's database
settings begin every transaction IMMEDIATE, with a busy timeout, so a second writer waits and is
never told the database is locked).

What counts: every queued turn is a message (a new one, a retry, a regenerated reply, an edited
message); the per-minute window is the last 60 seconds, the day and the month are UTC calendar
ones. Tokens and money are those of every model call made for the user's conversations, the
summariser's (compression) and the title maker's included, recorded as each call ends: a turn
that starts under a limit runs to its end, so use can pass a token or money limit by the turns
already running or waiting.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, Q, Sum
from django.utils import timezone

from compression.models import SettingsChange
from sessions.models import LimitDefaults, Turn, UsageDay, UserLimits
from sessions.models_limits import LIMIT_FIELDS, utc_day

MINUTE = dt.timedelta(seconds=60)
_ZERO = Decimal(0)


class LimitReached(Exception):
    """A limit refuses the send: ``text`` says which, the use against it, and ``resets_at`` when
    the user can send again (an aware UTC datetime)."""

    def __init__(self, text: str, resets_at: dt.datetime) -> None:
        super().__init__(text)
        self.text = text
        self.resets_at = resets_at


@dataclass(frozen=True)
class Limits:
    """A user's limits in force: None is no limit."""

    messages_per_minute: int | None = None
    messages_per_day: int | None = None
    input_tokens_per_day: int | None = None
    output_tokens_per_day: int | None = None
    cost_per_month: Decimal | None = None

    @property
    def any(self) -> bool:
        return any(getattr(self, name) is not None for name in LIMIT_FIELDS)


def _merged(defaults: LimitDefaults | None, own: UserLimits | None) -> Limits:
    values = {}
    for name in LIMIT_FIELDS:
        value = getattr(own, name) if own is not None else None
        if value is None and defaults is not None:
            value = getattr(defaults, name)
        values[name] = value or None  # zero: no limit
    return Limits(**values)


def limits_for(user) -> Limits:
    """The user's limits: each field of their own row when filled, else the default's."""
    return _merged(LimitDefaults.objects.filter(pk=LimitDefaults.SINGLETON_PK).first(),
                   UserLimits.objects.filter(user_id=user.pk).first())


def limits_by_user(user_ids) -> dict[int, Limits]:
    """{user id: limits} for many users, in two queries."""
    defaults = LimitDefaults.objects.filter(pk=LimitDefaults.SINGLETON_PK).first()
    own = {row.user_id: row for row in UserLimits.objects.filter(user_id__in=list(user_ids))}
    return {uid: _merged(defaults, own.get(uid)) for uid in user_ids}


@dataclass(frozen=True)
class Figures:
    """Sums of ``UsageDay`` rows (one day, or a month)."""

    messages: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    summariser_input_tokens: int = 0
    summariser_output_tokens: int = 0
    cost: Decimal = _ZERO


FIGURE_FIELDS = ("messages", "calls", "input_tokens", "output_tokens", "summariser_input_tokens",
                 "summariser_output_tokens", "cost")


@dataclass(frozen=True)
class Usage:
    """One user's use at ``now``: the sends of the last 60 seconds, today and this month (UTC)."""

    now: dt.datetime
    last_minute: int
    today: Figures
    month: Figures


def month_start(day: dt.date) -> dt.date:
    return day.replace(day=1)


def next_midnight(now: dt.datetime) -> dt.datetime:
    return dt.datetime.combine(utc_day(now) + dt.timedelta(days=1), dt.time.min, tzinfo=dt.UTC)


def next_month(now: dt.datetime) -> dt.datetime:
    first = month_start(utc_day(now))
    following = (first.replace(year=first.year + 1, month=1) if first.month == 12
                 else first.replace(month=first.month + 1))
    return dt.datetime.combine(following, dt.time.min, tzinfo=dt.UTC)


def _recent_sends(user, now: dt.datetime):
    return Turn.objects.filter(conversation__owner_id=user.pk, created_at__gt=now - MINUTE)


def usage_of(user, *, now: dt.datetime | None = None) -> Usage:
    """The user's use today and this month (two queries)."""
    now = now or timezone.now()
    today = utc_day(now)
    sums = {f"{when}_{name}": Sum(name, filter=Q(day=today) if when == "today" else None)
            for when in ("today", "month") for name in FIGURE_FIELDS}
    row = UsageDay.objects.filter(user_id=user.pk, day__gte=month_start(today), day__lte=today).aggregate(**sums)

    def figures(when: str) -> Figures:
        counts = {name: row[f"{when}_{name}"] or 0 for name in FIGURE_FIELDS if name != "cost"}
        return Figures(**counts, cost=row[f"{when}_cost"] or _ZERO)

    return Usage(now=now, last_minute=_recent_sends(user, now).aggregate(n=Count("id"))["n"],
                 today=figures("today"), month=figures("month"))


# --- The check ----------------------------------------------------------------------------------


def _user_lock(user) -> None:
    """Hold the user's row until the transaction ends (PostgreSQL); nothing to do on SQLite, whose
    write transaction already excludes every other writer."""
    options = {"no_key": True} if connection.features.has_select_for_no_key_update else {}
    list(get_user_model().objects.select_for_update(**options).filter(pk=user.pk).values_list("pk"))


def send_allowance_take(*, user, now: dt.datetime | None = None) -> None:
    """Count one message for ``user`` now, or raise ``LimitReached`` (nothing counted). Call it
    inside the transaction that stores the turn, before storing it."""
    now = now or timezone.now()
    limits = limits_for(user)
    if limits.any:
        _user_lock(user)
        refusals = _refusals(user, limits, now)
        if refusals:
            # The one that lasts longest: before it ends the user cannot send anyway.
            raise max(refusals, key=lambda r: r.resets_at)
    UsageDay.add(user_id=user.pk, day=utc_day(now), messages=1)


def _refusals(user, limits: Limits, now: dt.datetime) -> list[LimitReached]:
    out: list[LimitReached] = []
    if limits.messages_per_minute:
        limit = limits.messages_per_minute
        times = list(_recent_sends(user, now).order_by("-created_at").values_list("created_at", flat=True)[:limit])
        if len(times) >= limit:
            sent = _recent_sends(user, now).count()
            again = (times[limit - 1] + MINUTE).astimezone(dt.UTC)
            if again.microsecond:  # whole seconds, never early
                again = again.replace(microsecond=0) + dt.timedelta(seconds=1)
            out.append(LimitReached(f"You have sent {_n(sent, 'message')} in the last minute, "
                                    f"{_limit_words(sent, limit, f'limit of {limit:,} a minute')}; "
                                    f"you can send again at {again:%H:%M:%S} UTC.", again))
    need_days = (limits.messages_per_day or limits.input_tokens_per_day or limits.output_tokens_per_day
                 or limits.cost_per_month)
    if not need_days:
        return out
    usage = usage_of(user, now=now)
    midnight, month_end = next_midnight(now), next_month(now)
    today = usage.today
    checks: list[tuple[int | Decimal | None, int | Decimal, Callable[[Any, Any], str], dt.datetime]] = [
        (limits.messages_per_day, today.messages,
         lambda used, limit: f"You have sent {_n(used, 'message')} today, "
                             f"{_limit_words(used, limit, f'daily limit of {limit:,}')}", midnight),
        (limits.input_tokens_per_day, today.input_tokens,
         lambda used, limit: f"Your conversations have used {used:,} input tokens today (the summariser's "
                             f"included), {_limit_words(used, limit, f'daily limit of {limit:,}')}", midnight),
        (limits.output_tokens_per_day, today.output_tokens,
         lambda used, limit: f"Your conversations have used {used:,} output tokens today (the summariser's "
                             f"included), {_limit_words(used, limit, f'daily limit of {limit:,}')}", midnight),
        (limits.cost_per_month, usage.month.cost,
         lambda used, limit: f"Your conversations have cost {dollars(used)} this month, "
                             f"{_limit_words(used, limit, f'monthly limit of {dollars(limit)}')}", month_end),
    ]
    for allowed, used, words, again in checks:
        if allowed and used >= allowed:
            out.append(LimitReached(f"{words(used, allowed)}; you can send again at {when_words(again, now)}.", again))
    return out


# --- Words --------------------------------------------------------------------------------------


def _n(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _limit_words(used, limit, name: str) -> str:
    return f"your {name}" if used == limit else f"over your {name}"


def dollars(amount) -> str:
    return f"${Decimal(amount):,.2f}"


def when_words(moment: dt.datetime, now: dt.datetime) -> str:
    """"00:00 UTC on 15 July (in 3 h 12 min)": the time, its date, and how long until then."""
    moment = moment.astimezone(dt.UTC)
    return f"{moment:%H:%M} UTC on {moment.day} {moment:%B} ({wait_words(moment - now)})"


def wait_words(delta: dt.timedelta) -> str:
    minutes = max(1, -(-int(delta.total_seconds()) // 60))  # rounded up: never sooner than said
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"in {days} day{'s' if days != 1 else ''}" + (f" {hours} h" if hours else "")
    if hours:
        return f"in {hours} h {minutes} min" if minutes else f"in {hours} h"
    return f"in {minutes} min"


# --- Saving (the admin) -------------------------------------------------------------------------


def _text(value) -> str:
    return "" if value is None else str(value)


def limits_save(*, row: LimitDefaults | UserLimits, user=None, source: str = "admin") -> None:
    """Store a validated limits row and audit each changed field in the settings trail: group
    ``limits`` for the defaults, ``limits.<username>`` for one user's own limits."""
    with transaction.atomic():
        old = type(row).objects.select_for_update().filter(pk=row.pk).first() if row.pk else None
        row.save()
        SettingsChange.objects.bulk_create(
            _audit(user, source, row, name, _text(getattr(old, name, None)), _text(getattr(row, name)))
            for name in LIMIT_FIELDS if old is None or getattr(old, name) != getattr(row, name))


def limits_delete(*, row: UserLimits, user=None, source: str = "admin") -> None:
    """Remove one user's own limits (the defaults apply again), audited."""
    with transaction.atomic():
        SettingsChange.objects.bulk_create(_audit(user, source, row, name, _text(getattr(row, name)), "")
                                           for name in LIMIT_FIELDS if getattr(row, name) is not None)
        row.delete()


def _audit(user, source: str, row, name: str, old: str, new: str):
    group = "limits" if isinstance(row, LimitDefaults) else f"limits.{row.user.get_username()}"[:60]
    by = user if user is not None and getattr(user, "is_authenticated", False) else None
    return SettingsChange(user=by, username=by.get_username() if by else "", source=source, group=group,
                          field=name, old_value=old, new_value=new)
