"""The conversation sidebar: the user's conversations, newest activity first, with their model and
context pressure; search over their titles and message text; rename in place; delete with
confirmation. Thin, like ``sessions.views``: owner-checked lookups, services, templates.

Every action works without JavaScript (a page: GET shows the form or the confirmation, POST acts)
and in place with htmx (a fragment). Nothing is deleted on GET.
"""
from __future__ import annotations

from django.contrib import messages as flash
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, path, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget, trigger_client_event

from sessions import selectors
from sessions.models import Conversation
from sessions.presenters import sidebar_rows
from sessions.services import conversations, recall, runtime

SIDEBAR_LIMIT = 50
SEARCH_TITLES = 10
SEARCH_MESSAGES = 20
MAX_QUERY_CHARS = 200


def _own(request, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return conversation


def _page_path(request) -> str:
    """The page the user is on: the one the htmx request came from, or the `next` a form carried."""
    path_ = (request.htmx.current_url_abs_path if request.htmx else None) or request.POST.get("next") \
        or request.GET.get("next") or ""
    if not path_.startswith("/") or not url_has_allowed_host_and_scheme(path_, allowed_hosts={request.get_host()}):
        return ""
    return path_


def _open_conversation_id(request):
    """The conversation whose page the user is on, or None."""
    try:
        match = resolve(_page_path(request).split("?", 1)[0] or "/-")
    except Resolver404:
        return None
    return match.kwargs.get("conversation_id") if match.url_name == "conversation" else None


def sidebar_context(request, conversation: Conversation | None = None, *, cfg=None) -> dict:
    """What templates/sessions/_sidebar.html shows: the newest conversations with something in
    them, and the open one even when it is empty or older than the rest."""
    cfg = cfg or runtime.current_config()
    current_id = conversation.id if conversation is not None else _open_conversation_id(request)
    listed = list(selectors.conversation_list_for_user(user=request.user, including=current_id)[:SIDEBAR_LIMIT + 1])
    more = len(listed) > SIDEBAR_LIMIT
    listed = listed[:SIDEBAR_LIMIT]
    if conversation is not None and all(c.id != conversation.id for c in listed):
        listed.append(conversation)
    return {"rows": sidebar_rows(listed, cfg=cfg, current_id=current_id), "more": more,
            "next": request.path if conversation is not None else _page_path(request)}


def _row(request, conversation: Conversation, *, status: int = 200, editing: bool = False, error: str = "",
         value: str | None = None) -> HttpResponse:
    row = sidebar_rows([conversation], cfg=runtime.current_config(), current_id=_open_conversation_id(request))[0]
    return render(request, "sessions/sidebar/_row.html", {
        "row": row, "editing": editing, "error": error, "value": conversation.title if value is None else value,
        "next": _page_path(request)}, status=status)


def _back(request, fallback: str):
    target = _page_path(request)
    return redirect(target or fallback)


# The list and the search -----------------------------------------------------------------------

@require_GET
def sidebar_search(request):
    """Titles and message text of the user's conversations; an empty query is the usual list."""
    query = request.GET.get("q", "").strip()[:MAX_QUERY_CHARS]
    context: dict = {"q": query, "sidebar": None, "titles": [], "hits": [], "error": "", "next": _page_path(request)}
    if not query:
        context["sidebar"] = sidebar_context(request)
    else:
        terms = recall.search_terms(query)
        found = selectors.conversation_titles_matching(user=request.user, terms=terms, limit=SEARCH_TITLES)
        context["titles"] = [{"c": c, "html": recall.highlight_html(c.title, terms)} for c in found]
        try:
            hits = recall.search_owner(owner_id=request.user.pk, query=query, limit=SEARCH_MESSAGES)
        except recall.RecallUnavailable as exc:
            hits, context["error"] = [], str(exc)
        names = selectors.conversation_titles(user=request.user, ids={h.conversation_id for h in hits})
        context["hits"] = [{"hit": h, "title": names[h.conversation_id]} for h in hits if h.conversation_id in names]
    template = "sessions/sidebar/_results.html" if request.htmx else "sessions/sidebar/search.html"
    return render(request, template, context)


@require_GET
def sidebar_row(request, conversation_id):
    """One row as it is (what a cancelled rename goes back to)."""
    return _row(request, _own(request, conversation_id))


# Rename ----------------------------------------------------------------------------------------

@require_http_methods(["GET", "POST"])
def conversation_rename(request, conversation_id):
    """GET: the title as a text input (the row with htmx, a page without). POST: save it; in the
    row, or, with `place=heading`, for the editor on the page's heading."""
    conversation = _own(request, conversation_id)
    page_url = reverse("conversation", args=[conversation.id])
    if request.method == "GET":
        if request.htmx:
            return _row(request, conversation, editing=True)
        return render(request, "sessions/sidebar/rename.html", {"c": conversation, "value": conversation.title,
                                                                 "error": "", "next": _page_path(request)})
    title = request.POST.get("title", "")
    heading = request.POST.get("place") == "heading"
    try:
        conversation = conversations.conversation_rename(user=request.user, conversation_id=conversation.id, title=title)
    except conversations.ConversationRejected as exc:
        if not request.htmx:
            return render(request, "sessions/sidebar/rename.html", {
                "c": conversation, "value": title, "error": str(exc), "next": _page_path(request)}, status=422)
        if heading:
            response = render(request, "sessions/sidebar/_rename_error.html", {"error": str(exc)}, status=422)
            return reswap(retarget(response, "#title-rename-error"), "innerHTML")
        return _row(request, conversation, status=422, editing=True, error=str(exc), value=title)
    if not request.htmx:
        flash.info(request, f"Renamed to “{conversation.title}”.")
        return _back(request, page_url)
    response = reswap(HttpResponse(""), "none") if heading else _row(request, conversation)
    return trigger_client_event(response, "titleChanged", {"id": str(conversation.id), "title": conversation.title})


# Delete ----------------------------------------------------------------------------------------

@require_http_methods(["GET", "POST"])
def conversation_delete(request, conversation_id):
    """GET: the confirmation (in the row with htmx, a page without). POST: delete, or say why not."""
    conversation = _own(request, conversation_id)
    context = {"c": conversation, "error": "", "next": _page_path(request),
               "messages_count": conversation.messages.filter(visible=True).count()}
    if request.method == "GET":
        template = "sessions/sidebar/_delete_confirm.html" if request.htmx else "sessions/sidebar/delete.html"
        return render(request, template, context)
    was_open = str(_open_conversation_id(request)) == str(conversation.id)
    try:
        title = conversations.conversation_delete(user=request.user, conversation_id=conversation.id)
    except conversations.ConversationMissing:
        raise Http404("No such conversation") from None
    except conversations.ConversationRejected as exc:
        context["error"] = str(exc)
        if not request.htmx:
            return render(request, "sessions/sidebar/delete.html", context, status=409)
        response = render(request, "sessions/sidebar/_delete_confirm.html", context, status=422)
        return reswap(retarget(response, f"#sidebar-confirm-{conversation.id}"), "innerHTML")
    text = f"Deleted “{title}” and everything in it."
    if request.htmx and not was_open:
        return render(request, "sessions/sidebar/_deleted.html", {"text": text})
    flash.info(request, text)
    home = reverse("home")
    if request.htmx:
        return HttpResponseClientRedirect(home)
    return redirect(home if was_open else (_page_path(request) or home))


urlpatterns = [
    path("conversations/search", sidebar_search, name="sidebar-search"),
    path("conversations/<uuid:conversation_id>/row", sidebar_row, name="sidebar-row"),
    path("conversations/<uuid:conversation_id>/rename", conversation_rename, name="conversation-rename"),
    path("conversations/<uuid:conversation_id>/delete", conversation_delete, name="conversation-delete"),
]
