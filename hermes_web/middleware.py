"""Request-size guard, ahead of the CSRF check (which would otherwise read the body first and
answer an oversized post with a bare 400)."""
from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from sessions.services.attachments import human_size
from sessions.services.conversation_import import MAX_IMPORT_BYTES

_UPLOAD = re.compile(r"^/conversations/[0-9a-f-]{36}/attachments$")
_IMPORT = "/conversations/import"


class RequestSizeLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if _UPLOAD.match(request.path):
            # An attachment is streamed to a temporary file, not held in memory: its own limit
            # (the view refuses anything over it with a clear reason), plus the form's envelope.
            limit = settings.HERMES_ATTACHMENT_MAX_BYTES + 64 * 1024
        if request.path == _IMPORT:
            # An import's file is streamed to a temporary file too; its own limit, plus the envelope.
            limit = MAX_IMPORT_BYTES + 64 * 1024
            if length > limit:
                text = (f"The file is {human_size(length)}; an import may be at most {human_size(MAX_IMPORT_BYTES)}. "
                        "Nothing was imported.")
                body = render_to_string("sessions/_notice.html", {"text": text, "level": "error", "inner": True})
                return HttpResponse(body, status=413)
            return self.get_response(request)
        if limit is not None and length > limit and _UPLOAD.match(request.path):
            most = settings.HERMES_ATTACHMENT_MAX_BYTES
            return JsonResponse({"error": f"The upload is {human_size(length)}; a file may be at most "
                                          f"{human_size(most)}. Nothing was stored."}, status=413)
        if limit is not None and length > limit and not request.path.startswith("/admin/"):
            text = (f"The message is too large to accept ({length:,} bytes; the limit is {limit:,}). "
                    "Nothing was stored. Put large content in a file in the workspace and ask the agent to read it.")
            body = render_to_string("sessions/_notice.html", {"text": text, "level": "error", "inner": True})
            return HttpResponse(body, status=413)
        return self.get_response(request)
