"""One-time notices per user account.

``codex_autoraise_notice_for`` returns the SPEC §4 notice at most once per user account: the first
caller that records the ``UserNotice`` row gets the text, every later call (any conversation, any
process) gets None. The row is written in its own transaction; a concurrent duplicate loses on the
unique constraint and returns None.
"""
from __future__ import annotations

from django.db import IntegrityError, transaction

from compression import settings_store
from compression.core.thresholds import is_codex_autoraise_model, resolve_threshold
from sessions.models import UserNotice

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
