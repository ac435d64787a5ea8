"""Chat turns on the web side: submit (check the input, run gateway hygiene (SPEC §5.1), store a
queued turn and hand it to a worker on commit), cancel a queued turn, stop the running one,
regenerate or retry the last reply, and edit the last message and send it again.

A submitted message is stored on its `Turn` and enters the model's history only when the turn
starts (`sessions.agent.loop`), after every turn before it: one turn at a time per conversation,
in order. The turn row is the source of truth: when the task queue cannot be reached the turn
stays queued (the user is told) and runs once a worker is handed it again.
Replaced messages are archived and marked `replaced`, never deleted.
Every path that queues a turn first takes one send from the user's allowance
(``sessions.services.limits``) in the same transaction: a send over a limit is refused with the
reason and the time the user can send again, nothing stored.
A message may carry attachments uploaded before (``sessions.services.attachments``): the turn
claims them in its own transaction, or the send is refused with nothing stored; a message with
attachments may have no text of its own.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from compression.core.hygiene import hygiene_decision
from sessions import live, selectors
from sessions.models import Conversation, Message, Session, Turn
from sessions.services import attachments, limits, pressure, runtime, titles
from sessions.services.compaction import compression_request
from sessions.services.context import context_messages, context_rows, session_active
from sessions.services.enqueue import enqueue_fast, turn_run_signature

log = logging.getLogger(__name__)

QUEUE_DOWN_NOTICE = ("Your message is saved, but the task queue cannot be reached right now, so the agent has "
                     "not started on it. It runs as soon as the queue is back; there is no need to send it again.")
BUSY = "A turn is still running or waiting; stop it or wait for it to finish first."


class TurnRejected(Exception):
    """The request cannot be accepted; the text says why and nothing was stored."""


class Handover:
    """A new turn's hand-over to a worker, registered to run when the turn's transaction commits
    (a worker must find the turn stored). ``notice`` is "" until then; afterwards it is still ""
    when the task queue took the turn (or a hygiene compaction goes first and hands it over),
    and holds QUEUE_DOWN_NOTICE when the queue could not be reached: the turn stays queued and
    runs once the queue is back. The pages open on the conversation are told of the queued turn
    and of a new title unless the queue could not be reached (the same Redis carries those
    pushes)."""

    def __init__(self, turn: Turn, *, conversation: Conversation, compaction_first: bool, retitled: bool) -> None:
        self.turn, self.conversation = turn, conversation
        self.compaction_first, self.retitled = compaction_first, retitled
        self.notice = ""

    def __call__(self) -> None:
        if not self.compaction_first:
            self.notice = turn_enqueue(self.turn.id)
            if self.notice:
                return
        live.turn_queued(self.turn)
        if self.retitled:
            live.title_changed(self.conversation)


class Submission(NamedTuple):
    """An accepted turn. ``notice``: "" when a worker was handed the turn, else what to tell the
    user (read it once the outermost transaction committed: the hand-over runs then)."""

    turn: Turn
    handover: Handover

    @property
    def notice(self) -> str:
        return self.handover.notice


def hygiene_check(*, conversation: Conversation, session: Session, cfg):
    """Gateway hygiene (SPEC §5.1) on the projected next request (§3.4)."""
    messages = context_messages(session)
    window = runtime.session_window(conversation, session, cfg)
    tools = pressure.offered_tools(cfg, conversation=conversation).all
    projected = pressure.projection_of(conversation, session, cfg, messages=messages, tools=tools).tokens
    return hygiene_decision(
        message_count=len(messages) - 1, context_length=window, tokens=projected, enabled=cfg.compression.enabled,
        hard_message_limit=cfg.compression.hygiene_hard_message_limit,
    )


def turn_enqueue(turn_id: int) -> str:
    """Hand a turn to a worker. "" when done; otherwise the notice to show (the turn stays queued)."""
    return "" if enqueue_fast(turn_run_signature(turn_id), what=f"turn {turn_id}") else QUEUE_DOWN_NOTICE


def _checked_text(text: str, *, may_be_empty: bool = False) -> str:
    text = (text or "").strip()
    if not text and not may_be_empty:
        raise TurnRejected("The message is empty.")
    limit = settings.HERMES_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise TurnRejected(f"The message is too long: {len(text):,} characters (the limit is {limit:,}). "
                           "Put large content in a file in the workspace and ask the agent to read it.")
    return text


def _own(user, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise TurnRejected("No such conversation.")
    return conversation


def _allowance(user) -> None:
    """Take one send from the user's allowance (inside the transaction that stores the turn)."""
    try:
        limits.send_allowance_take(user=user)
    except limits.LimitReached as exc:
        raise TurnRejected(exc.text) from None


def _queue(turn: Turn, *, hygiene: bool, cfg, conversation: Conversation, session: Session,
           retitled: bool = False) -> Handover:
    """Hand the new turn to a worker on commit, after a hygiene compaction when one fires."""
    compaction_first = hygiene and hygiene_check(conversation=conversation, session=session, cfg=cfg).fire
    if compaction_first:
        # Hygiene compacts first; the compression job hands the turn over when it ends.
        compression_request(conversation_id=conversation.id, trigger="hygiene", then_turn=turn.id)
    handover = Handover(turn, conversation=conversation, compaction_first=compaction_first, retitled=retitled)
    transaction.on_commit(handover)
    return handover


def turn_submit(*, user, conversation_id, text: str, attachment_ids=()) -> Submission:
    """Queue the user's message (with the pending attachments ``attachment_ids``, claimed in the
    same transaction: a refused one refuses the message, nothing stored)."""
    conversation = _own(user, conversation_id)
    try:
        ids = attachments.attachment_ids(attachment_ids)
    except attachments.AttachmentRefused as exc:
        raise TurnRejected(str(exc)) from None
    text = _checked_text(text, may_be_empty=bool(ids))
    cfg = runtime.current_config()
    with transaction.atomic():
        _allowance(user)
        session = session_active(conversation)
        turn = Turn.objects.create(conversation=conversation, text=text)
        try:
            attachments.attachments_claim(user=user, conversation=conversation, turn=turn, ids=ids)
        except attachments.AttachmentRefused as exc:
            raise TurnRejected(str(exc)) from None
        conversation.last_activity_at = timezone.now()
        retitled = conversation.title == titles.DEFAULT_TITLE and not conversation.title_manual
        if retitled:
            # The first message's cleaned line at once; the made title follows the first reply.
            conversation.title = titles.title_from_message(text or ", ".join(
                turn.attachments.order_by("id").values_list("name", flat=True)))
        conversation.save(update_fields=["last_activity_at", "title"])
        handover = _queue(turn, hygiene=True, cfg=cfg, conversation=conversation, session=session, retitled=retitled)
    return Submission(turn, handover)


def turn_cancel(*, user, conversation_id, turn_id) -> Turn:
    """Cancel a turn that has not started; its text never enters the history."""
    conversation = _own(user, conversation_id)
    cancelled = Turn.objects.filter(id=turn_id, conversation=conversation, status="queued").update(
        status="cancelled", finished_at=timezone.now())
    turn = Turn.objects.filter(id=turn_id, conversation=conversation).first()
    if turn is None:
        raise TurnRejected("No such message.")
    if not cancelled:
        raise TurnRejected("That message has already started: use Stop to end it." if turn.status == "running"
                           else "That message is no longer waiting.")
    attachments.attachments_release(turn)  # pending again: the composer lists them after a reload
    live.turn_cancelled(turn)
    return turn


def turn_stop(*, user, conversation_id) -> Turn:
    """Ask the running turn to stop; the worker ends it at the next delta or before the next tool."""
    conversation = _own(user, conversation_id)
    turn = conversation.turns.filter(status="running").order_by("id").first()
    if turn is None:
        raise TurnRejected("Nothing is running.")
    Turn.objects.filter(id=turn.id).update(stop_requested=True)
    turn.stop_requested = True
    live.turn_changed(turn)
    return turn


def _replace_from(session: Session, first: Message) -> int:
    """Archive `first` and everything after it in the session's context, marked replaced."""
    return context_rows(session).filter(seq__gte=first.seq).update(archived=True, replaced=True)


def _last_exchange(conversation: Conversation) -> tuple[Session, Message]:
    """The active session and its last user message (refused when that message was compacted)."""
    # Two clicks at once: the second waits for the first's transaction, then sees its turn.
    list(Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk"))
    if conversation.turns.filter(status__in=("queued", "running")).exists():
        raise TurnRejected(BUSY)
    session = session_active(conversation)
    last = context_rows(session).filter(role="user", is_summary=False).order_by("-seq").first()
    if last is None or not last.visible:
        raise TurnRejected("The last message was compacted into a summary, so it cannot be answered again; "
                           "send it again as a new message instead.")
    return session, last


def turn_regenerate(*, user, conversation_id) -> Submission:
    """Answer the last user message again; the reply it replaces is archived (kept, shown as replaced)."""
    conversation = _own(user, conversation_id)
    with transaction.atomic():
        _allowance(user)  # the user's lock before the conversation's, on every path
        session, last = _last_exchange(conversation)
        context_rows(session).filter(seq__gt=last.seq).update(archived=True, replaced=True)
        turn = Turn.objects.create(conversation=conversation, kind="regenerate", user_message=last)
        transaction.on_commit(lambda: live.transcript_changed(conversation))
        handover = _queue(turn, hygiene=False, cfg=None, conversation=conversation, session=session)
    return Submission(turn, handover)


def turn_retry(*, user, conversation_id) -> Submission:
    """Run the failed latest turn again: from its message when that entered the history, else
    queue its text anew."""
    conversation = _own(user, conversation_id)
    latest = conversation.turns.order_by("-id").first()
    if latest is None or latest.status != "failed":
        raise TurnRejected("Only a failed last turn can be retried.")
    carried = list(latest.attachments.values_list("id", flat=True))
    if latest.user_message_id is None and (latest.text or carried):
        with transaction.atomic():  # its attachments go with its text to the new turn, or stay
            attachments.attachments_release(latest)
            return turn_submit(user=user, conversation_id=conversation_id, text=latest.text, attachment_ids=carried)
    return turn_regenerate(user=user, conversation_id=conversation_id)


def turn_edit(*, user, conversation_id, text: str) -> Submission:
    """Replace the last user message (and the reply to it) with `text`, and send that."""
    conversation = _own(user, conversation_id)
    text = _checked_text(text)
    with transaction.atomic():
        _allowance(user)
        session, last = _last_exchange(conversation)
        _replace_from(session, last)
        turn = Turn.objects.create(conversation=conversation, kind="edit", text=text)
        conversation.last_activity_at = timezone.now()
        conversation.save(update_fields=["last_activity_at"])
        transaction.on_commit(lambda: live.transcript_changed(conversation))
        handover = _queue(turn, hygiene=False, cfg=None, conversation=conversation, session=session)
    return Submission(turn, handover)
