"""Per-user limits and the usage they are checked against (sessions/services/limits.py).

``LimitDefaults`` (one row) holds the limits every user has; ``UserLimits`` overrides some of them
for one user. ``UsageDay`` counts one user's use of one day (UTC): the messages accepted (every
queued turn: a new message, a retry, a regenerated reply, an edited message) and the tokens and
cost of every model call made for the user's conversations, the summariser's and the title
maker's included. The counts are kept apart from the conversations, so deleting a conversation
does not give its use back. Months are sums of days.
"""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F
from django.db.models.signals import post_save
from django.dispatch import receiver

# The largest value each limit takes (a typing slip, not a real limit, beyond these).
MAX_MESSAGES_PER_MINUTE = 10_000
MAX_MESSAGES_PER_DAY = 1_000_000
MAX_TOKENS_PER_DAY = 10_000_000_000
MAX_COST_PER_MONTH = Decimal("1000000")

NO_LIMIT_DEFAULT = "Empty or 0: no limit."
NO_LIMIT_OVERRIDE = "Empty: the default limit applies; 0: no limit for this user."


def _count(what: str, maximum: int, empty: str, *, big: bool = False) -> models.Field:
    field = models.PositiveBigIntegerField if big else models.PositiveIntegerField
    return field(null=True, blank=True, validators=[MaxValueValidator(maximum)],
                 help_text=f"{what}. At most {maximum:,}. {empty}")


def _money(empty: str) -> models.DecimalField:
    return models.DecimalField(
        max_digits=10, decimal_places=2, null=True, blank=True,
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(MAX_COST_PER_MONTH)],
        help_text=("US dollars a user's model calls may cost in a calendar month (UTC), at the prices the cost "
                   f"figures use (Admin → Model prices, else the model catalogue). At most {MAX_COST_PER_MONTH:,}. "
                   + empty))


PER_MINUTE = "Messages a user may send in any 60 seconds"
PER_DAY = "Messages a user may send in a calendar day (UTC)"
INPUT_PER_DAY = ("Input tokens a user's model calls may read in a day (UTC): the whole prompt of every call, cached "
                 "parts included, the summariser's and the title maker's calls counted too")
OUTPUT_PER_DAY = ("Output tokens a user's model calls may write in a day (UTC), the summariser's and the title "
                  "maker's calls counted too")


class LimitDefaults(models.Model):
    """The limits every user has unless their own row says otherwise. One row (pk 1)."""

    SINGLETON_PK = 1

    messages_per_minute = _count(PER_MINUTE, MAX_MESSAGES_PER_MINUTE, NO_LIMIT_DEFAULT)
    messages_per_day = _count(PER_DAY, MAX_MESSAGES_PER_DAY, NO_LIMIT_DEFAULT)
    input_tokens_per_day = _count(INPUT_PER_DAY, MAX_TOKENS_PER_DAY, NO_LIMIT_DEFAULT, big=True)
    output_tokens_per_day = _count(OUTPUT_PER_DAY, MAX_TOKENS_PER_DAY, NO_LIMIT_DEFAULT, big=True)
    cost_per_month = _money(NO_LIMIT_DEFAULT)

    class Meta:
        verbose_name = verbose_name_plural = "default limits"

    def __str__(self) -> str:
        return "Default limits"

    def save(self, *args, **kwargs):
        self.pk = self.SINGLETON_PK
        super().save(*args, **kwargs)

    @classmethod
    def load(cls) -> LimitDefaults:
        return cls.objects.get_or_create(pk=cls.SINGLETON_PK)[0]


class UserLimits(models.Model):
    """One user's own limits: a filled field replaces the default, an empty one keeps it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="limits")
    messages_per_minute = _count(PER_MINUTE, MAX_MESSAGES_PER_MINUTE, NO_LIMIT_OVERRIDE)
    messages_per_day = _count(PER_DAY, MAX_MESSAGES_PER_DAY, NO_LIMIT_OVERRIDE)
    input_tokens_per_day = _count(INPUT_PER_DAY, MAX_TOKENS_PER_DAY, NO_LIMIT_OVERRIDE, big=True)
    output_tokens_per_day = _count(OUTPUT_PER_DAY, MAX_TOKENS_PER_DAY, NO_LIMIT_OVERRIDE, big=True)
    cost_per_month = _money(NO_LIMIT_OVERRIDE)

    class Meta:
        verbose_name = "user's limits"
        verbose_name_plural = "users' limits"

    def __str__(self) -> str:
        return f"Limits of {self.user}"


LIMIT_FIELDS = ("messages_per_minute", "messages_per_day", "input_tokens_per_day", "output_tokens_per_day",
                "cost_per_month")


def utc_day(moment: dt.datetime) -> dt.date:
    return moment.astimezone(dt.UTC).date()


class UsageDay(models.Model):
    """One user's use on one day (UTC). ``input_tokens`` and ``output_tokens`` count every call;
    the ``summariser_*`` fields are the part of them made by the auxiliary model's calls
    (compression summaries and titles)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    messages = models.PositiveIntegerField(default=0, help_text="Turns accepted (queued).")
    calls = models.PositiveIntegerField(default=0, help_text="Model calls recorded.")
    input_tokens = models.PositiveBigIntegerField(default=0, help_text="Whole prompts: input, cache read and write.")
    output_tokens = models.PositiveBigIntegerField(default=0)
    summariser_input_tokens = models.PositiveBigIntegerField(default=0)
    summariser_output_tokens = models.PositiveBigIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0, help_text="US dollars.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "day"], name="one_usage_row_per_user_and_day")]
        indexes = [models.Index(fields=["day"])]

    def __str__(self) -> str:
        return f"{self.user} on {self.day}"

    @classmethod
    def add(cls, *, user_id, day, **amounts) -> None:
        """Add ``amounts`` (field → number) to the user's row of ``day``, made when missing. One
        UPDATE of the sums, so concurrent additions never lose one."""
        changes = {name: F(name) + value for name, value in amounts.items() if value}
        if not changes:
            return
        if not cls.objects.filter(user_id=user_id, day=day).update(**changes):
            cls.objects.get_or_create(user_id=user_id, day=day)  # a concurrent creation is taken as found
            cls.objects.filter(user_id=user_id, day=day).update(**changes)


@receiver(post_save, sender="agent_sessions.ApiCall")
def _api_call_counted(sender, instance, created: bool, raw: bool = False, **kwargs) -> None:
    """Every recorded model call counts for the conversation's owner on the day it was made."""
    if not created or raw:
        return
    summariser = instance.purpose != "agent"
    prompt, output = instance.prompt_tokens or 0, instance.output_tokens or 0
    UsageDay.add(user_id=instance.conversation.owner_id, day=utc_day(instance.created_at), calls=1,
                 input_tokens=prompt, output_tokens=output, cost=instance.cost or 0,
                 summariser_input_tokens=prompt if summariser else 0,
                 summariser_output_tokens=output if summariser else 0)
