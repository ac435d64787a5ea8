"""Conversation pages. Thin: look up through selectors (owner-checked), call services, render."""
from __future__ import annotations

import re

from django.conf import settings
from django.contrib import messages as flash
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from llm.models import model_label
from llm.routes import route_label
from sessions import fragments, live, presenters, selectors, transcript
from sessions.models import Conversation
from sessions.services import routes, turns
from sessions.services.compaction import (
    MANUAL_DEBOUNCE_SECONDS,
    SKIPPED_REPEAT,
    compression_preview,
    compression_request,
)
from sessions.services.conversations import conversation_new
from sessions.services.feasibility import feasibility
from sessions.services.notices import codex_autoraise_notice_for
from sessions.services.routes import RouteUnavailable, route_default, route_env, routes_offered
from sessions.services.runtime import ConfigurationProblem, current_config
from sessions.views_sidebar import sidebar_context


def _own(request, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return conversation


# Seconds a notice that only confirms what the user just did stays (it can be dismissed sooner).
CONFIRMATION_SECONDS = 10


def _reply(request, conversation: Conversation, text: str, *, level: str = "info", html: str = "",
           kind: str | None = None, expires_on: str = "", expires_after: int | None = None):
    """A notice for htmx requests; a flash message and the page for plain form posts. `html`, a
    rendered fragment, replaces the notice (a form the user must answer: shown on its own page
    without htmx, in a modal dialog with it). `kind`, `expires_on`, `expires_after`: see
    `fragments.render_notice` (the kind defaults to one derived from the text)."""
    if html and not request.htmx:
        return render(request, "sessions/confirm.html", {"conversation": conversation, "fragment": html})
    if request.htmx:
        # 422 for a refused input (htmx is configured to swap it into the notices).
        notice = html or fragments.render_to_notice(text, level=level, kind=kind, expires_on=expires_on,
                                                    expires_after=expires_after)
        return HttpResponse(notice, status=422 if level == "error" else 200)
    getattr(flash, "error" if level == "error" else "info")(request, text)
    return redirect("conversation", conversation_id=conversation.id)


@require_GET
def home(request):
    cfg = current_config()
    conversations = selectors.conversation_list_for_user(user=request.user)
    return render(request, "sessions/home.html", {"conversations": presenters.conversation_rows(conversations, cfg=cfg),
                                                  "routes": routes_offered(cfg), "default": route_default(cfg)})


def _model_choice(request) -> tuple[str, str]:
    """`provider:model` from the model picker (provider names never contain a colon)."""
    provider, _, model = request.POST.get("model", "").partition(":")
    return provider.strip(), model.strip()


@require_POST
def conversation_create(request, leaving: Conversation | None = None):
    """A new conversation, or the empty one it would replace (`/new` from `leaving`, the button:
    the user's newest empty conversation)."""
    provider, model = _model_choice(request) if request.POST.get("model") else ("", "")
    try:
        conversation, _ = conversation_new(owner=request.user, cfg=current_config(), provider=provider, model=model,
                                           leaving=leaving)
    except RouteUnavailable as exc:
        if request.htmx:
            return HttpResponse(fragments.render_to_notice(str(exc), level="error", kind=fragments.NEW_CONVERSATION),
                                status=422)
        flash.error(request, str(exc))
        return redirect("home")
    if leaving is not None and conversation.id == leaving.id:
        return _reply(request, leaving, "This conversation is still empty, so it is the new one: write your first "
                      "message below.", kind=fragments.NEW_CONVERSATION, expires_after=CONFIRMATION_SECONDS)
    url = reverse("conversation", args=[conversation.id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
def conversation_model_switch(request, conversation_id):
    """Two steps: without `confirm` the reply warns (cold cache, the new threshold); with it, switch.
    The model already in use is refused at either step, nothing changed."""
    conversation = _own(request, conversation_id)
    provider, model = _model_choice(request)
    cfg = current_config()
    try:
        if request.POST.get("confirm") != "1":
            choice = routes.model_switch_resolve(conversation=conversation, cfg=cfg, provider=provider, model=model)
            return _reply(request, conversation, "", level="warning",
                          html=fragments.render_model_switch_confirm(conversation, choice, cfg, request=request))
        routes.conversation_model_switch(conversation=conversation, cfg=cfg, provider=provider, model=model)
    except routes.ModelAlreadyInUse as exc:
        return _reply(request, conversation, str(exc), level="info", kind=fragments.MODEL_SWITCH)
    except RouteUnavailable as exc:
        return _reply(request, conversation, str(exc), level="error", kind=fragments.MODEL_SWITCH)
    url = reverse("conversation", args=[conversation.id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_GET
def conversation_detail(request, conversation_id):
    conversation = _own(request, conversation_id)
    cfg = current_config()
    live_version = live.state_version(conversation, cfg)  # before the panels are read: see its doc
    turns = transcript.turns_shown(conversation)
    return render(request, "sessions/conversation.html", {
        "conversation": conversation,
        "live_version": live_version,
        "sidebar": sidebar_context(request, conversation, cfg=cfg),
        "route_label": route_label(conversation.provider, base_url=cfg.model.base_url, env=route_env()),
        "model_label": model_label(conversation.model),
        "routes": routes_offered(cfg),
        "feasibility_warnings": feasibility(cfg, conversation=conversation).warnings,
        "codex_notice": codex_autoraise_notice_for(request.user, conversation, cfg=cfg),
        "transcript_html": fragments.render_transcript(conversation, oob=False, turns=turns),
        "turn_status_html": fragments.render_turn_status(conversation, oob=False, turns=turns),
        "mcp_switch_html": fragments.render_mcp_switch(conversation, oob=False),
        "gauge": presenters.gauge(conversation, cfg=cfg),
        "cache": presenters.cache_panel(conversation, cfg=cfg),
        "events": selectors.compression_events(conversation),
        "max_chars": settings.HERMES_MAX_MESSAGE_CHARS,
        "draft": request.session.pop(_draft_key(conversation.id), ""),  # a refused plain post's text
    })


COMMANDS = ("/new", "/compress [topic]", "/compress --preview [topic]")
_COMMAND = re.compile(r"^/([A-Za-z][\w-]*)(?:\s|$)")


def unknown_command(text: str) -> str | None:
    """The name of a `/command` this page does not know, or None (a path such as `/etc/hosts`
    or a message starting with `//` is text for the model)."""
    match = _COMMAND.match(text)
    if match is None or match.group(1) in ("new", "compress"):
        return None
    return match.group(1)


def _draft_key(conversation_id) -> str:
    return f"composer-draft:{conversation_id}"


def _composer_error(request, conversation: Conversation, text: str):
    """A refused message: the error beside the composer (which keeps its text), 422. A plain form
    post (no JavaScript) gets the page again with the error and the text back in the composer."""
    if not request.htmx:
        request.session[_draft_key(conversation.id)] = request.POST.get("text", "")
        return _reply(request, conversation, text, level="error")
    response = HttpResponse(fragments.render_to_notice(text, level="error", kind=fragments.SEND_ERROR), status=422)
    return reswap(retarget(response, "#composer-error"), "innerHTML")


def _submitted(request, conversation: Conversation, submission):
    """The answer to an accepted turn: nothing (the page hears the rest over its socket), or the
    notice when the task queue was unreachable, with the waiting turn shown at once."""
    if not submission.notice:
        return HttpResponse("") if request.htmx else redirect("conversation", conversation_id=conversation.id)
    if not request.htmx:
        return _reply(request, conversation, submission.notice, level="warning")
    return HttpResponse(fragments.render_to_notice(submission.notice, level="warning", kind=fragments.SEND_QUEUE_DOWN)
                        + fragments.render_queue(conversation.id))


@require_POST
def conversation_send(request, conversation_id):
    conversation = _own(request, conversation_id)
    text = request.POST.get("text", "")
    attachment_ids = request.POST.getlist("attachments")
    command = text.strip()
    if attachment_ids and (command in ("/new", "/compress") or command.startswith("/compress ")
                           or unknown_command(command)):
        return _composer_error(request, conversation, "Commands take no attachments; nothing was done. Send the "
                               "command without them, or start the text with two slashes (//) to send it to the model.")
    if command == "/new":
        return conversation_create(request, leaving=conversation)
    if command == "/compress --preview":
        return _preview(request, conversation, None)
    if command.startswith("/compress --preview "):
        return _preview(request, conversation, command[len("/compress --preview "):].strip() or None)
    if command == "/compress" or command.startswith("/compress "):
        return _compress(request, conversation, command[len("/compress"):].strip() or None)
    name = unknown_command(command)
    if name is not None:
        return _composer_error(request, conversation, (
            f"/{name} is not a command here; nothing was sent. Commands: {', '.join(COMMANDS)}. "
            "To send the text to the model as it is, start it with two slashes (//)."))
    if command.startswith("//"):
        text = command[1:]
    try:
        submission = turns.turn_submit(user=request.user, conversation_id=conversation.id, text=text,
                                 attachment_ids=attachment_ids)
    except turns.TurnRejected as exc:
        return _composer_error(request, conversation, str(exc))
    return _submitted(request, conversation, submission)


def _turn_action(request, conversation_id, action):
    """Run one of the turn services; a refusal is a notice (422), never a lost request."""
    conversation = _own(request, conversation_id)
    try:
        result = action(conversation)
    except turns.TurnRejected as exc:
        return _reply(request, conversation, str(exc), level="error", kind=fragments.TURN_ACTION)
    if hasattr(result, "notice"):
        return _submitted(request, conversation, result)
    return HttpResponse("") if request.htmx else redirect("conversation", conversation_id=conversation.id)


@require_POST
def turn_stop(request, conversation_id):
    return _turn_action(request, conversation_id, lambda c: turns.turn_stop(user=request.user, conversation_id=c.id))


@require_POST
def turn_cancel(request, conversation_id, turn_id):
    conversation = _own(request, conversation_id)
    try:
        turn = turns.turn_cancel(user=request.user, conversation_id=conversation.id, turn_id=turn_id)
    except turns.TurnRejected as exc:
        return _reply(request, conversation, str(exc), level="error", kind=fragments.QUEUE_CANCEL)
    return _reply(request, conversation, f"Cancelled before it started; “{turn.text[:80]}” never reached the agent.",
                  kind=fragments.QUEUE_CANCEL, expires_after=CONFIRMATION_SECONDS)


@require_POST
def turn_retry(request, conversation_id):
    return _turn_action(request, conversation_id, lambda c: turns.turn_retry(user=request.user, conversation_id=c.id))


@require_POST
def turn_regenerate(request, conversation_id):
    return _turn_action(request, conversation_id,
                        lambda c: turns.turn_regenerate(user=request.user, conversation_id=c.id))


@require_POST
def turn_edit(request, conversation_id):
    return _turn_action(request, conversation_id, lambda c: turns.turn_edit(
        user=request.user, conversation_id=c.id, text=request.POST.get("text", "")))


@require_POST
def conversation_compress(request, conversation_id):
    conversation = _own(request, conversation_id)
    return _compress(request, conversation, request.POST.get("topic", "").strip()[:500] or None)


def _compress(request, conversation: Conversation, topic: str | None):
    if not current_config().compression.enabled:
        return _reply(request, conversation, "Compression is switched off by an administrator "
                      "(compression.enabled), so nothing was compressed.", level="warning",
                      kind=fragments.COMPRESSION_REFUSED)
    if conversation.messages.filter(session__ended_at__isnull=True, archived=False).count() < 4:
        return _reply(request, conversation, "Nothing to compress yet: a compression needs at least 4 messages.",
                      level="warning", kind=fragments.COMPRESSION_REFUSED)
    requested = compression_request(conversation_id=conversation.id, trigger="manual", focus_topic=topic, force=True)
    event = requested.event
    if event.status == "skipped":
        if event.reason == SKIPPED_REPEAT:
            text = (f"This compression ran moments ago: the same request within {MANUAL_DEBOUNCE_SECONDS} s is taken "
                    "as a double click, so nothing new was queued.")
            return _reply(request, conversation, text, level="warning", kind=fragments.COMPRESSION_DUPLICATE,
                          expires_after=CONFIRMATION_SECONDS)
        # Gone once the compression it points at ended (the event feed shows how).
        running = next((e for e in selectors.compression_events(conversation, limit=5)
                        if e.status in ("queued", "running")), None)
        return _reply(request, conversation, "A compression is already running for this conversation; its progress "
                      "is in the event feed.", level="warning", kind=fragments.COMPRESSION_DUPLICATE,
                      expires_on=fragments.expires_when_event_ends(running.id) if running else "")
    what = f" focusing on “{topic}”" if topic else ""
    ends = fragments.expires_when_event_ends(event.id)
    if requested.enqueued is False:  # None: not known before the request's transaction commits
        return _reply(request, conversation, f"Compression queued{what}, but the task queue cannot be reached right "
                      "now: it runs as soon as the queue is back; there is no need to ask again.", level="warning",
                      kind=fragments.COMPRESSION_QUEUED, expires_on=ends)
    return _reply(request, conversation, f"Compression queued{what}. Progress appears in the event feed.",
                  kind=fragments.COMPRESSION_QUEUED, expires_on=ends)


def _preview(request, conversation: Conversation, topic: str | None):
    try:
        preview = compression_preview(conversation_id=conversation.id, focus_topic=topic)
    except ConfigurationProblem as exc:
        return _reply(request, conversation, str(exc), level="error", kind=fragments.PREVIEW)
    # Gone once a compaction was committed or aborted after it: what it described is out of date.
    latest = next(iter(selectors.compression_events(conversation, limit=1)), None)
    return _reply(request, conversation, preview_text(preview), kind=fragments.PREVIEW,
                  expires_on=fragments.expires_when_compacted_after(latest.id if latest else None))


def preview_text(preview) -> str:
    if not preview.has_content:
        return f"Preview: nothing to compress ({preview.reason or 'the boundaries leave nothing in the middle'})."
    focus = f", focusing on “{preview.focus_topic}”" if preview.focus_topic else ""
    return (f"Preview: {preview.messages_to_summarize} of {preview.messages_before} messages "
            f"(~{preview.tokens_to_summarize:,} of ~{preview.tokens_before:,} tokens) would be summarised{focus}; "
            f"{preview.head_messages} kept at the start and {preview.tail_messages} at the end, "
            f"{preview.pruned_count} old tool outputs shortened. Nothing was changed.")


@require_GET
def compaction_originals(request, conversation_id, event_id):
    conversation = _own(request, conversation_id)
    event = get_object_or_404(conversation.compression_events, id=event_id)
    rows = selectors.compaction_originals(event)
    return render(request, "sessions/originals.html", {"conversation": conversation, "event": event,
                                                        "entries": [transcript.message_entry(m) for m in rows]})
