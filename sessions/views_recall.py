"""Recall pages: the user's search over the whole conversation (archived parts included), an
original opened in its context with the match highlighted, and preview-and-edit before a manual
compression. Thin, like ``sessions.views``: owner-checked lookups, services, templates."""
from __future__ import annotations

from django.contrib import messages as flash
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from sessions import selectors
from sessions.models import Conversation
from sessions.services import recall, recall_edit
from sessions.services.runtime import ConfigurationProblem, current_config

SEARCH_RESULTS = 20
CONTEXT_AROUND = 6
MAX_QUERY_CHARS = 500


def _own(request, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return conversation


@require_GET
def recall_search(request, conversation_id):
    """Ranked hits among every original of the conversation; a fragment for htmx, else a page."""
    conversation = _own(request, conversation_id)
    query = request.GET.get("q", "").strip()[:MAX_QUERY_CHARS]
    hits, error = [], ""
    if not query:
        error = "Type the words to look for."
    else:
        try:
            hits = recall.search(conversation_id=conversation.id, query=query, limit=SEARCH_RESULTS)
        except recall.RecallUnavailable as exc:
            error = str(exc)
        if not hits and not error:
            error = f"Nothing in this conversation matches “{query}”."
    context = {"conversation": conversation, "q": query, "hits": hits, "error": error}
    template = "sessions/recall/_results.html" if request.htmx else "sessions/recall/search.html"
    return render(request, template, context, status=422 if error and not query else 200)


@require_GET
def recall_message(request, conversation_id, message_id):
    """An original with the messages around it, the match highlighted."""
    conversation = _own(request, conversation_id)
    query = request.GET.get("q", "").strip()[:MAX_QUERY_CHARS]
    try:
        rows = recall.neighbourhood(conversation_id=conversation.id, message_id=message_id, before=CONTEXT_AROUND,
                                    after=CONTEXT_AROUND)
    except recall.BadReference:
        raise Http404("No such message in this conversation") from None
    terms = recall.search_terms(query) if query else []
    entries = []
    for row in rows:
        text = recall.message_text(row.role, row.content, row.tool_calls)
        entries.append({"id": row.id, "role": row.role, "name": row.name, "hit": row.id == message_id,
                        "html": recall.highlight_html(text, terms), "created_at": row.created_at,
                        "compacted": row.archived or row.session.ended_at is not None})
    return render(request, "sessions/recall/message.html",
                  {"conversation": conversation, "entries": entries, "q": query, "message_id": message_id})


OPEN_PREVIEW_NOTE = ("A compression preview opens from its button, not from a link or a reload: it asks the "
                     "auxiliary model for a fresh draft. Use “Preview and edit…” under “Search this conversation” "
                     "on this page.")


def _to_preview_form(request, conversation: Conversation):
    """A GET of a preview or commit URL (a bookmark, back/forward, a reload): the conversation,
    at the preview form, with a note saying how to open it. A GET never drafts (it would cost a
    summariser call) and never commits."""
    flash.info(request, OPEN_PREVIEW_NOTE)
    return redirect(reverse("conversation", args=[conversation.id]) + "#compress-preview-form")


@require_http_methods(["GET", "POST"])
def compress_preview(request, conversation_id):
    """What a manual compression would write now, editable; nothing is changed."""
    conversation = _own(request, conversation_id)
    if request.method == "GET":
        return _to_preview_form(request, conversation)
    topic = request.POST.get("topic", "").strip()[:500] or None
    if not current_config().compression.enabled:
        flash.warning(request, "Compression is switched off by an administrator (compression.enabled).")
        return redirect("conversation", conversation_id=conversation.id)
    try:
        draft = recall_edit.compression_draft(conversation=conversation, focus_topic=topic)
    except ConfigurationProblem as exc:
        flash.error(request, str(exc))
        return redirect("conversation", conversation_id=conversation.id)
    return render(request, "sessions/recall/preview.html",
                  {"conversation": conversation, "draft": draft, "summary": draft.prose, "error": "",
                   "token": draft.token, "topic": topic or ""})


@require_http_methods(["GET", "POST"])
def compress_commit(request, conversation_id):
    """Commit the user's summary; a refusal shows the page again with their text kept."""
    conversation = _own(request, conversation_id)
    if request.method == "GET":
        return _to_preview_form(request, conversation)
    summary = request.POST.get("summary", "")
    token = request.POST.get("token", "")
    topic = request.POST.get("topic", "").strip()[:500] or None
    try:
        event = recall_edit.compression_commit_edited(conversation=conversation, summary=summary, token=token,
                                          focus_topic=topic)
    except recall_edit.EditRejected as exc:
        return render(request, "sessions/recall/preview.html",
                      {"conversation": conversation, "draft": None, "summary": summary, "error": str(exc),
                       "token": token, "topic": topic or ""}, status=409)
    if event.status == "compressed":
        flash.info(request, f"Compressed with the summary you reviewed: {event.messages_before:,} → "
                            f"{event.messages_after:,} messages.")
    else:
        flash.warning(request, f"Nothing was compressed ({event.reason}).")
    return redirect("conversation", conversation_id=conversation.id)


urlpatterns = [
    path("conversations/<uuid:conversation_id>/search", recall_search, name="recall-search"),
    path("conversations/<uuid:conversation_id>/messages/<int:message_id>/", recall_message, name="recall-message"),
    path("conversations/<uuid:conversation_id>/compress/preview", compress_preview, name="compress-preview"),
    path("conversations/<uuid:conversation_id>/compress/commit", compress_commit, name="compress-commit"),
]
