"""Attachments over HTTP: upload one file to the composer (JSON answers, for attachments.js),
list and remove the pending ones, and serve a stored file or its thumbnail to its owner only.
Thin, like ``sessions.views``: owner-checked services; refusals are 4xx JSON ``{"error": ...}``.

A served file carries its stored media type, ``X-Content-Type-Options: nosniff`` and a
``Content-Disposition``: inline for images (shown by the browser under the site's CSP), an
attachment (a download) for everything else, so no stored file is ever rendered as a page."""
from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, Http404, JsonResponse
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_http_methods

from sessions import selectors
from sessions.services import attachments

MULTIPART_SLACK = 64 * 1024  # the form's own bytes around the file


def attachment_json(a) -> dict:
    """What the composer's chip shows."""
    return {"id": a.id, "name": a.name, "size": a.size, "size_label": attachments.human_size(a.size), "kind": a.kind,
            "url": reverse("attachment-file", args=[a.id]),
            "thumbnail_url": reverse("attachment-thumbnail", args=[a.id]) if a.kind == "image" else None,
            "note": "" if a.has_text else f"{a.name}: {attachments.NO_TEXT_LAYER}"}


def _refused(exc: attachments.AttachmentRefused) -> JsonResponse:
    return JsonResponse({"error": str(exc)}, status=exc.status)


@require_http_methods(["GET", "POST"])
def attachments_collection(request, conversation_id):
    """GET: the pending attachments (the composer lists them again after a reload) and the limits.
    POST: upload one file (field ``file``; ``name``, the file's own name, optional)."""
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        return JsonResponse({"error": "No such conversation."}, status=404)
    if request.method == "GET":
        pending = attachments.attachments_pending(user=request.user, conversation=conversation)
        return JsonResponse({"attachments": [attachment_json(a) for a in pending],
                             "max_bytes": settings.HERMES_ATTACHMENT_MAX_BYTES,
                             "per_message": settings.HERMES_ATTACHMENTS_PER_MESSAGE})
    limit = settings.HERMES_ATTACHMENT_MAX_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit + MULTIPART_SLACK:  # refused before the body is read
        return JsonResponse({"error": f"The file is too large: a file may be at most "
                             f"{attachments.human_size(limit)}. Nothing was stored."}, status=413)
    upload = request.FILES.get("file")
    if upload is None:
        return JsonResponse({"error": "No file was sent (the form field is “file”)."}, status=400)
    try:
        row = attachments.attachment_store(user=request.user, conversation_id=conversation.id, upload=upload,
                                           name=request.POST.get("name"))
    except attachments.AttachmentRefused as exc:
        return _refused(exc)
    return JsonResponse(attachment_json(row), status=201)


@require_http_methods(["DELETE", "POST"])
def attachment_remove(request, conversation_id, attachment_id):
    """Remove a pending attachment (DELETE, or POST for a form)."""
    try:
        attachments.attachment_remove(user=request.user, conversation_id=conversation_id, attachment_id=attachment_id)
    except attachments.AttachmentRefused as exc:
        return _refused(exc)
    return JsonResponse({"removed": attachment_id})


def _served(request, attachment_id, *, thumbnail: bool):
    row = attachments.attachment_get_for_user(user=request.user, attachment_id=attachment_id)
    response = attachment_response(row, thumbnail=thumbnail)
    response["Cache-Control"] = "private, max-age=3600"
    return response


def attachment_response(row, *, thumbnail: bool) -> FileResponse:
    """The stored file (or its thumbnail) of ``row``, an attachment the caller may show; 404 for
    none, for a thumbnail of what is not an image, and for a file no longer stored."""
    if row is None or (thumbnail and row.kind != "image"):
        raise Http404("No such attachment")
    try:
        handle = open(row.thumbnail_path if thumbnail else row.path, "rb")
    except OSError:
        raise Http404("The file is no longer stored") from None
    if thumbnail:
        media_type = "image/png" if handle.read(4) == b"\x89PNG" else "image/jpeg"
        handle.seek(0)
    else:
        media_type = row.media_type
    response = FileResponse(handle, content_type=media_type, as_attachment=row.kind != "image", filename=row.name)
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_GET
def attachment_file(request, attachment_id):
    return _served(request, attachment_id, thumbnail=False)


@require_GET
def attachment_thumbnail(request, attachment_id):
    return _served(request, attachment_id, thumbnail=True)


urlpatterns = [
    path("conversations/<uuid:conversation_id>/attachments", attachments_collection, name="attachment-upload"),
    path("conversations/<uuid:conversation_id>/attachments/<int:attachment_id>", attachment_remove,
         name="attachment-remove"),
    path("conversations/<uuid:conversation_id>/attachments/<int:attachment_id>/remove", attachment_remove,
         name="attachment-remove-post"),
    path("attachments/<int:attachment_id>", attachment_file, name="attachment-file"),
    path("attachments/<int:attachment_id>/thumbnail", attachment_thumbnail, name="attachment-thumbnail"),
]
