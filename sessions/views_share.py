"""Share links over HTTP: the owner's panel (list, create, revoke; owner-checked, CSRF-protected
POSTs) and the public read-only page a link opens, with the files it may show.

The public views need no login (``login_not_required``) and answer the same 404 for an unknown,
revoked or expired token. What they send carries ``X-Robots-Tag: noindex, nofollow``,
``Referrer-Policy: no-referrer`` (the token never leaves in a Referer header) and no-cache headers
(a revoked link stops working at once, in caches too). The page is a document of its own: no
sidebar, no account bar, no composer, no socket, no CSRF token, no links into the app; the files it
shows are reached through the share URL only."""
from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST, require_safe

from sessions import selectors, transcript
from sessions.models import Conversation, ShareLink
from sessions.services import share
from sessions.views_attachments import attachment_response

ROBOTS = "noindex, nofollow"


def _own(request, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return conversation


def _links(request, conversation: Conversation, *, created: dict | None = None, error: str = "", status: int = 200):
    """The panel's list of active links (after a create: the new URL, shown this once). A page of
    its own without htmx."""
    html = render_to_string("sessions/_share_links.html", {
        "conversation": conversation, "links": share.share_links_of(user=request.user, conversation=conversation),
        "created": created, "error": error, "standalone": not request.htmx}, request=request)
    if request.htmx:
        return HttpResponse(html, status=status)
    return render(request, "sessions/confirm.html", {"conversation": conversation, "fragment": html}, status=status)


@never_cache
@require_GET
def share_links(request, conversation_id):
    return _links(request, _own(request, conversation_id))


@require_POST
def share_create(request, conversation_id):
    conversation = _own(request, conversation_id)
    try:
        link, token = share.share_link_create(user=request.user, conversation_id=conversation.id,
                                              expires=request.POST.get("expires", "never"),
                                              include_workspace=request.POST.get("include_workspace") == "1")
    except share.ShareMissing:
        raise Http404("No such conversation") from None
    except share.ShareRefused as exc:
        return _links(request, conversation, error=str(exc), status=422)
    url = request.build_absolute_uri(reverse("share-page", args=[token]))
    response = _links(request, conversation, created={"link": link, "url": url})
    response["Cache-Control"] = "no-store"  # the one answer that holds the token
    return response


@require_POST
def share_revoke(request, conversation_id, link_id):
    conversation = _own(request, conversation_id)
    try:
        share.share_link_revoke(user=request.user, conversation_id=conversation.id, link_id=link_id)
    except share.ShareMissing:
        raise Http404("No such link") from None
    return _links(request, conversation)


# The public side ---------------------------------------------------------------------------------

def _shared(token: str) -> ShareLink:
    link = share.share_link_get(token=token)
    if link is None:
        raise Http404("No such page")  # unknown, revoked and expired alike
    return link


def _public(response):
    response["X-Robots-Tag"] = ROBOTS
    response["Referrer-Policy"] = "no-referrer"
    return response


@login_not_required
@never_cache
@require_safe
def share_page(request, token):
    link = _shared(token)
    conversation = link.conversation
    entries = [e for e in transcript.transcript(conversation, turns=[]) if e["kind"] == "message"]
    files, more = share.workspace_files(link=link)
    return _public(render(request, "sessions/share_page.html", {
        "conversation": conversation, "link": link, "token": token, "entries": entries,
        "message_count": sum(1 for e in entries if not e["is_summary"]),
        "cut": len(entries) >= selectors.TRANSCRIPT_LIMIT, "files": files, "more_files": more}))


def _attachment(request, token, attachment_id, *, thumbnail: bool):
    link = _shared(token)
    row = share.shared_attachment(link=link, attachment_id=attachment_id)
    response = attachment_response(row, thumbnail=thumbnail)
    return _public(response)


@login_not_required
@never_cache
@require_safe
def share_attachment(request, token, attachment_id):
    return _attachment(request, token, attachment_id, thumbnail=False)


@login_not_required
@never_cache
@require_safe
def share_attachment_thumbnail(request, token, attachment_id):
    return _attachment(request, token, attachment_id, thumbnail=True)


@login_not_required
@never_cache
@require_safe
def share_file(request, token, name):
    """A workspace file, always as a download (never rendered as a page of this site)."""
    link = _shared(token)
    handle = share.workspace_file_open(link=link, name=name)
    if handle is None:
        raise Http404("No such file")
    response = FileResponse(handle, content_type="application/octet-stream", as_attachment=True,
                            filename=name.rsplit("/", 1)[-1])
    response["X-Content-Type-Options"] = "nosniff"
    return _public(response)


urlpatterns = [
    path("conversations/<uuid:conversation_id>/share/links", share_links, name="share-links"),
    path("conversations/<uuid:conversation_id>/share/create", share_create, name="share-create"),
    path("conversations/<uuid:conversation_id>/share/<int:link_id>/revoke", share_revoke, name="share-revoke"),
    path("share/<str:token>/", share_page, name="share-page"),
    path("share/<str:token>/attachments/<int:attachment_id>", share_attachment, name="share-attachment"),
    path("share/<str:token>/attachments/<int:attachment_id>/thumbnail", share_attachment_thumbnail,
         name="share-attachment-thumbnail"),
    path("share/<str:token>/files/<path:name>", share_file, name="share-file"),
]
