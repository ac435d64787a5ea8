"""Conversations as their owner manages them: rename, delete, the title made from the first
exchange, and a new conversation that reuses an empty one.

- A rename marks the title manual (``title_manual``): no made title ever replaces it.
- A delete removes the conversation with everything of it (sessions, messages, turns, events,
  model calls, locks, attachments) and, once that committed, its workspace folder and its
  attachments' folder; it is refused, deleting nothing, while a turn or a compression runs or
  waits. Only the owner's own conversation.
- After the first reply of a conversation whose title is not manual, the title is made: by the
  auxiliary model when one is configured (a task on the `compression` queue, off the turn), else
  (or when that call fails) from the first message's first meaningful line (``titles``).
- ``conversation_new`` reuses an empty conversation (``selectors.has_content``) instead of adding
  another: the one being left, or the user's newest empty one.
Every title change is pushed to the pages open on the conversation (``live.title_changed``).
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from llm.models import get_model
from sessions import live, selectors
from sessions.models import Conversation, Turn
from sessions.services import runtime, titles
from sessions.services.context import session_active
from sessions.services.enqueue import enqueue_fast, title_make_signature
from sessions.services.routes import conversation_create, route_resolve, window_override
from sessions.services.usage import usage_record

log = logging.getLogger(__name__)

TITLE_MAX_TOKENS = 40
BUSY_TURN = ("Stop the running turn first: a turn is running or waiting in this conversation, so nothing was "
             "deleted.")
BUSY_COMPRESSION = ("Wait for the compression to finish first: one is running or queued for this conversation "
                    "(the event feed shows it), so nothing was deleted.")


class ConversationRejected(Exception):
    """The request cannot be done; the text says why and nothing changed."""


class ConversationMissing(ConversationRejected):
    """No such conversation of this user."""


# Rename ----------------------------------------------------------------------------------------

def title_checked(title: str) -> str:
    """The title the user typed, on one line; refused when empty or longer than RENAME_MAX_CHARS."""
    text = titles.one_line(title)
    if not text:
        raise ConversationRejected("A title cannot be empty; the old title is kept.")
    if len(text) > titles.RENAME_MAX_CHARS:
        raise ConversationRejected(f"A title is at most {titles.RENAME_MAX_CHARS} characters (this one has "
                                   f"{len(text)}); the old title is kept.")
    return text


def conversation_rename(*, user, conversation_id, title: str) -> Conversation:
    text = title_checked(title)
    conversation = selectors.conversation_get_for_user(user=user, conversation_id=conversation_id)
    if conversation is None:
        raise ConversationMissing("No such conversation.")
    Conversation.objects.filter(pk=conversation.pk).update(title=text, title_manual=True)
    conversation.title, conversation.title_manual = text, True
    transaction.on_commit(lambda: live.title_changed(conversation))
    return conversation


# Delete ----------------------------------------------------------------------------------------

def conversation_delete(*, user, conversation_id) -> str:
    """Delete the user's conversation and everything of it; its title. ``ConversationRejected``
    (nothing deleted) while a turn or a compression runs or waits."""
    with transaction.atomic():
        # The row lock first, as every writer of the conversation's sessions takes it: a turn or a
        # compression starting now waits for this transaction and then finds nothing.
        conversation = Conversation.objects.select_for_update().filter(id=conversation_id, owner=user).first()
        if conversation is None:
            raise ConversationMissing("No such conversation.")
        busy = selectors.conversation_busy(conversation)
        if busy:
            raise ConversationRejected(BUSY_TURN if busy == "turn" else BUSY_COMPRESSION)
        title, workspace = conversation.title, conversation.workspace
        files = Path(settings.HERMES_ATTACHMENTS_DIR) / str(conversation.id)
        conversation.delete()
        transaction.on_commit(lambda: workspace_remove(workspace))
        transaction.on_commit(lambda: workspace_remove(files, root=settings.HERMES_ATTACHMENTS_DIR))
    return title


def workspace_remove(workspace: Path, *, root=None) -> None:
    """Remove a deleted conversation's workspace folder, or its attachments' folder with ``root``
    the attachments' root (only ever a folder directly under the root; a symbolic link is
    unlinked, never followed)."""
    root = Path(settings.HERMES_WORKSPACES_DIR if root is None else root)
    if workspace.parent != root:
        log.error("not removing %s: not a workspace folder", workspace)
        return
    try:
        if workspace.is_symlink():
            workspace.unlink()
        elif workspace.exists():
            shutil.rmtree(workspace)
    except OSError:
        log.exception("the workspace folder %s of a deleted conversation could not be removed", workspace)


# A new conversation ----------------------------------------------------------------------------

def conversation_new(*, owner, cfg, provider: str = "", model: str = "",
                     leaving: Conversation | None = None) -> tuple[Conversation, bool]:
    """(conversation, reused). The conversation being left when it is empty, else the owner's
    newest empty one, else a new one. A reused conversation moves to the model asked for (when one
    was) and to the top of the list. ``RouteUnavailable`` for a model no route offers."""
    choice = route_resolve(cfg, provider=provider, model=model) if (provider or model) else None
    with transaction.atomic():
        reuse = leaving if leaving is not None and selectors.conversation_is_empty(leaving) else None
        reuse = reuse or selectors.conversation_newest_empty(user=owner)
        if reuse is None:
            return conversation_create(owner=owner, cfg=cfg, provider=provider, model=model), False
        reuse = Conversation.objects.select_for_update().get(pk=reuse.pk)
        fields = ["last_activity_at"]
        reuse.last_activity_at = timezone.now()
        if choice is not None and (reuse.provider, reuse.model) != (choice.provider, choice.model):
            reuse.provider, reuse.model = choice.provider, choice.model
            reuse.context_length = window_override(cfg, choice)
            fields += ["provider", "model", "context_length"]
            session = session_active(reuse)
            session.context_length, session.last_prompt_tokens = None, 0
            session.save(update_fields=["context_length", "last_prompt_tokens"])
        reuse.save(update_fields=fields)
    return reuse, True


# Titles ----------------------------------------------------------------------------------------

def title_model_configured(cfg) -> bool:
    """Whether an auxiliary model is configured (a provider of its own, or a model named); without
    one the title is the first message's cleaned line and no model is asked."""
    return not (cfg.auxiliary.provider in ("auto", "main") and not cfg.auxiliary.model)


def title_after_reply(*, turn: Turn) -> None:
    """After a turn finished: when it gave the conversation's first reply and the title is not
    manual, make the title (queued for the auxiliary model, or at once without one). Never raises:
    a title must not spoil the turn it follows."""
    try:
        conversation = Conversation.objects.get(pk=turn.conversation_id)
        if conversation.title_manual or turn.status != "done":
            return
        if Turn.objects.filter(conversation=conversation, status="done").exclude(pk=turn.pk).exists():
            return  # not the first exchange
        if not title_model_configured(runtime.current_config()):
            conversation_title_make(conversation_id=conversation.id)
            return
        transaction.on_commit(lambda: enqueue_fast(title_make_signature(str(conversation.id)),
                                                   what=f"the title of conversation {conversation.id}"))
    except Exception:
        log.warning("the title of conversation %s was not made", turn.conversation_id, exc_info=True)


def _ask_for_title(conversation: Conversation, cfg, message: str, reply: str) -> str:
    """The auxiliary model's title for the first exchange ("" when it gave none); its call is
    recorded like every model call (purpose "title")."""
    provider, model = runtime.aux_route(conversation, cfg)
    session = session_active(conversation)
    info = get_model(model)
    max_tokens = min(TITLE_MAX_TOKENS, info.max_output) if info else TITLE_MAX_TOKENS
    try:
        final = provider.complete([{"role": "user", "content": titles.title_prompt(message, reply)}], model=model,
                                  max_tokens=max_tokens, timeout=cfg.auxiliary.timeout)
    except Exception as exc:
        usage_record(conversation_id=conversation.id, session_id=session.id, usage=None, model=model,
                     provider=getattr(provider, "name", ""), purpose="title", error=str(exc))
        raise
    usage_record(conversation_id=conversation.id, session_id=session.id, usage=final.usage, model=model,
                 provider=getattr(provider, "name", ""), purpose="title", latency=final.latency,
                 stop_reason=final.stop_reason)
    return titles.title_from_answer(final.text or "")


def conversation_title_make(*, conversation_id) -> str | None:
    """Make the title from the first exchange and save it unless the user set one meanwhile; the
    title saved, or None (no exchange yet, a manual title, nothing new)."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or conversation.title_manual:
        return None
    exchange = selectors.first_exchange(conversation)
    if exchange is None:
        return None
    message, reply = exchange
    title = titles.title_from_message(message)
    cfg = runtime.current_config()
    if title_model_configured(cfg):
        try:
            title = _ask_for_title(conversation, cfg, message, reply) or title
        except Exception as exc:  # the model away, a bad route: the cleaned first line stands
            log.warning("the auxiliary model made no title for conversation %s (%s)", conversation.id, exc)
    if title == conversation.title:
        return None
    # Conditional: a rename that came first wins.
    if not Conversation.objects.filter(pk=conversation.pk, title_manual=False).update(title=title):
        return None
    conversation.title = title
    live.title_changed(conversation)
    return title
