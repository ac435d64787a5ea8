"""Preview and edit before a manual compression: the summary the auxiliary model would write now
and what would stay verbatim, without changing anything (``compression_draft``); then the user's
own text committed as the summary (``compression_commit_edited``), or nothing at all (cancel).

The draft runs the real engine with the real summariser (its calls are recorded and cost what
they cost) and keeps none of its state. The commit runs the same engine with a summariser that
returns the user's text, under the compression lock and the turn lease, so it never interleaves
with a turn or another compression. The draft hands out a signed ``token`` naming the live
context and the draft's text: the commit refuses when the context changed since (the summary
must describe the turns it replaces) and knows whether the text was edited. An edited summary
starts with ``EDITED_MARK`` (shown in the divider) and its event's reason says so; the draft
committed unchanged is recorded as previewed.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from django.core import signing
from django.utils import timezone

from compression.core.lcm import split_lcm_body
from compression.core.markers import is_summary_message, strip_summary_wrapping
from compression.core.summary import SummaryResult
from sessions.models import CompressionEvent, Conversation, Session
from sessions.services import compaction, runtime
from sessions.services.context import context_messages, context_rows, session_active
from sessions.services.locks import COMPRESSION_LOCK, TURN_LOCK, lock_acquire, lock_release
from sessions.services.recall import message_text

EDITED_MARK = "[Summary edited by the user before it was committed.]"
EDITED_REASON = "summary edited by the user"
PREVIEWED_REASON = "summary previewed by the user"
TOKEN_SALT = "sessions.recall_edit.draft"
MAX_SUMMARY_CHARS = 60_000
EXCERPT_CHARS = 240
# A compaction is worth committing when it saves at least this many tokens and this share of the
# context: below that the saving is smaller than what it costs (the replaced messages leave the
# agent's context for a summary, and the next request writes the whole prompt to a cold cache).
MIN_SAVING_TOKENS = 500
MIN_SAVING_SHARE = 0.05


class EditRejected(Exception):
    """The edit cannot be committed now; the message says why and what to do."""


@dataclass
class Draft:
    engine: str
    token: str  # signed: the live context's fingerprint and the draft text's hash
    focus_topic: str
    ok: bool
    reason: str = ""
    prose: str = ""  # what the user may edit
    index: str = ""  # the anchor index the lcm engine appends (mechanical, not editable)
    summarised: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    head: list[dict] = field(default_factory=list)  # kept verbatim before the summary
    tail: list[dict] = field(default_factory=list)  # kept verbatim after it

    @property
    def saving(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def worth_minimum(self) -> int:
        """The smallest saving worth a compaction of this context (see MIN_SAVING_TOKENS)."""
        return max(MIN_SAVING_TOKENS, round(self.tokens_before * MIN_SAVING_SHARE))

    @property
    def worth_it(self) -> bool:
        return self.ok and self.saving >= self.worth_minimum

    @property
    def not_worth_reason(self) -> str:
        """Why committing this draft is not worth it; empty when it is (or when there is no draft)."""
        if not self.ok or self.worth_it:
            return ""
        if self.saving <= 0:
            replaced = f"{self.summarised:,} message{'' if self.summarised == 1 else 's'}"
            saved = f"it would save nothing (the summary is as long as the {replaced} it replaces, or longer)"
        else:
            share = self.saving / self.tokens_before if self.tokens_before else 0
            saved = (f"it would save only ~{self.saving:,} tokens, {share:.1%} of the ~{self.tokens_before:,}-token "
                     "context")
        return (f"This compression is not worth it: {saved}. A compression pays off from ~{self.worth_minimum:,} "
                f"tokens saved ({MIN_SAVING_SHARE:.0%} of the context, at least {MIN_SAVING_TOKENS:,}): below that, "
                "the replaced messages leave the agent's context for a summary and the next request rebuilds the "
                "prompt cache from cold, which costs more than it saves. Keep chatting and compress later, when "
                "there is more to gain.")


def context_fingerprint(session: Session) -> str:
    """Names the session's live context exactly: another message, or a compaction, changes it."""
    ids = ",".join(str(i) for i in context_rows(session).values_list("id", flat=True))
    return hashlib.sha256(f"{session.id}:{ids}".encode()).hexdigest()[:32]


def _digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()[:32]


def draft_token(fingerprint: str, prose: str) -> str:
    return signing.dumps({"fp": fingerprint, "h": _digest(prose)}, salt=TOKEN_SALT)


def _excerpt(msg: dict) -> dict:
    text = message_text(msg.get("role", ""), msg.get("content"), msg.get("tool_calls"))
    return {"role": msg.get("role", ""), "name": msg.get("name", ""),
            "text": text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS - 1] + "…"}


def _prose_and_index(summary_text: str) -> tuple[str, str]:
    prose, index = split_lcm_body(strip_summary_wrapping(summary_text))
    return prose.removeprefix(EDITED_MARK).lstrip(), index


def compression_draft(*, conversation: Conversation, focus_topic: str | None = None) -> Draft:
    """The summary a manual compression would write now, and what it would keep; nothing changes."""
    cfg = runtime.current_config()
    session = session_active(conversation)
    fingerprint = context_fingerprint(session)
    # The same routes a queued compression uses.
    summarisers = compaction.summarisers_for(conversation=conversation, session=session, cfg=cfg)
    engine = runtime.engine_build(conversation=conversation, session=session, cfg=cfg, summariser=summarisers.primary,
                                  fallback_summariser=summarisers.fallback)
    messages = context_messages(session)
    result = engine.compress(messages, focus_topic=focus_topic, force=True,
                             extra_context=compaction.memory_context(messages), today=timezone.localdate())
    draft = Draft(engine=engine.name, token="", focus_topic=focus_topic or "", ok=result.compressed,
                  reason=result.reason or "", summarised=result.summarized_count, tokens_before=result.tokens_before,
                  tokens_after=result.tokens_after)
    if not result.compressed:
        draft.reason = draft.reason or "there is nothing to compress yet"
        return draft
    draft.prose, draft.index = _prose_and_index(result.summary or "")
    draft.token = draft_token(fingerprint, draft.prose)
    at = next(i for i, m in enumerate(result.messages) if is_summary_message(m))
    draft.head = [_excerpt(m) for m in result.messages[1:at]]
    draft.tail = [_excerpt(m) for m in result.messages[at + 1:]]
    return draft


def _fixed(text: str):
    def summarise(prompt: str, budget: int) -> SummaryResult:
        return SummaryResult(text, "end_turn")

    return summarise


def compression_commit_edited(*, conversation: Conversation, summary: str, token: str,
                              focus_topic: str | None = None) -> CompressionEvent:
    """Compress now with ``summary`` as the summary body; ``EditRejected`` (nothing changed) when
    the text is empty or too long, the token is not a draft's, the context changed since the
    draft, or the conversation is busy."""
    text = (summary or "").strip()
    if not text:
        raise EditRejected("The summary is empty: write what the agent should remember, or cancel.")
    if len(text) > MAX_SUMMARY_CHARS:
        raise EditRejected(f"The summary is too long: {len(text):,} characters (at most {MAX_SUMMARY_CHARS:,}).")
    try:
        signed = signing.loads(token or "", salt=TOKEN_SALT)
    except signing.BadSignature:
        raise EditRejected("This preview is not valid any more; preview again (your text is kept).") from None
    session = session_active(conversation)
    if context_fingerprint(session) != signed.get("fp"):
        raise EditRejected("The conversation changed since this preview (a message arrived or it was compressed), "
                           "so this summary may not describe what it would replace. Preview again; your text is kept.")
    ttl = compaction.lock_ttl()
    holder = lock_acquire(conversation_id=conversation.id, kind=COMPRESSION_LOCK, ttl=ttl)
    if holder is None:
        raise EditRejected("A compression is already running for this conversation; try again in a moment.")
    turn_holder = lock_acquire(conversation_id=conversation.id, kind=TURN_LOCK, ttl=ttl)
    if turn_holder is None:
        lock_release(conversation_id=conversation.id, kind=COMPRESSION_LOCK, holder=holder)
        raise EditRejected("The agent is answering right now; commit again when it has finished.")
    edited = _digest(text) != signed.get("h")
    event = CompressionEvent.objects.create(conversation=conversation, session=session, trigger="manual",
                                            status="running", phase="starting", focus_topic=focus_topic or "",
                                            reason=EDITED_REASON if edited else PREVIEWED_REASON)
    try:
        outcome = compaction.compression_with_summariser(
            conversation=conversation, session=session, event=event, holder=holder,
            summariser=_fixed(f"{EDITED_MARK}\n\n{text}" if edited else text))
    finally:
        lock_release(conversation_id=conversation.id, kind=TURN_LOCK, holder=turn_holder)
    return outcome.event
