"""Notices for the user: one-time notices per account, and the auxiliary-fallback notice.

``codex_autoraise_notice_for`` returns the SPEC §4 notice at most once per user account: the first
caller that records the ``UserNotice`` row gets the text, every later call (any conversation, any
process) gets None. The row is written in its own transaction; a concurrent duplicate loses on the
unique constraint and returns None.

``auxiliary_fallback_notify`` tells the conversation's open pages when its auxiliary summariser
failed in ``AUX_FALLBACK_STREAK`` compressions in a row (the main model wrote those summaries), so
a broken auxiliary setting does not go unnoticed; the event feed says so too while it lasts.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from compression import settings_store
from compression.core.thresholds import is_codex_autoraise_model, resolve_threshold
from sessions import live
from sessions.models import CompressionEvent, UserNotice

AUX_FALLBACK_STREAK = 2
# Compressions that called a summariser (a skipped, queued or no-op one says nothing about it).
SUMMARISING_STATUSES = ("compressed", "failed")

CODEX_AUTORAISE_NOTICE = "codex_autoraise"
OPT_OUT_HINT = "Staff change it in Admin → Context compression → compression settings."


def codex_autoraise_notice_for(user, conversation, *, cfg=None) -> str | None:
    """The one-time Codex autoraise notice for ``user`` viewing ``conversation``, or None.

    None when the conversation's model is not a Codex gpt-5.4/5.5/5.6 route, when
    ``compression.codex_gpt55_autoraise`` or ``compression.codex_gpt55_autoraise_notice`` is off,
    when the configured threshold is already ≥ 0.85 (nothing was raised), or when this user has
    already seen it. Returning the text records it as shown.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    if not is_codex_autoraise_model(conversation.provider, conversation.model):
        return None  # checked first: no query for the usual conversation
    if UserNotice.objects.filter(user=user, key=CODEX_AUTORAISE_NOTICE).exists():
        return None
    c = (cfg or settings_store.current()).compression
    if not (c.codex_gpt55_autoraise and c.codex_gpt55_autoraise_notice):
        return None
    decision = resolve_threshold(c.threshold, provider=conversation.provider, model=conversation.model,
                                 codex_autoraise=True, codex_autoraise_notice=True)
    if not decision.raised or not decision.notice:
        return None
    try:
        with transaction.atomic():
            UserNotice.objects.create(user=user, key=CODEX_AUTORAISE_NOTICE)
    except IntegrityError:
        return None  # another request showed it first
    return f"{decision.notice} {OPT_OUT_HINT}"


def auxiliary_fallback_notice(*, event: CompressionEvent) -> str | None:
    """The notice when ``event``'s auxiliary summariser failed and so did the one of each of the
    conversation's previous compressions, back to ``AUX_FALLBACK_STREAK`` in a row; else None."""
    if not event.aux_failure:
        return None
    previous = list(CompressionEvent.objects.filter(conversation_id=event.conversation_id, id__lt=event.id,
                                                    status__in=SUMMARISING_STATUSES)
                    .order_by("-id").values_list("aux_failure", flat=True)[:AUX_FALLBACK_STREAK - 1])
    if len(previous) < AUX_FALLBACK_STREAK - 1 or not all(previous):
        return None
    reason = event.aux_failure if len(event.aux_failure) <= 300 else event.aux_failure[:299] + "…"
    return (f"{AUX_FALLBACK_STREAK} compressions in a row: the auxiliary model failed: {reason}; the main model "
            "wrote these summaries. Ask an administrator to check the auxiliary model settings.")


def auxiliary_fallback_notify(*, event: CompressionEvent) -> str | None:
    """Push the auxiliary-fallback notice to the conversation's open pages when it applies."""
    text = auxiliary_fallback_notice(event=event)
    if text:
        live.notice(event.conversation_id, text, level="warning")
    return text
