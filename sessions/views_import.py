"""Import a conversation from a file (the form on the home page): a ``hermes-web/1`` JSON export
or a plain OpenAI-style ``messages`` array, recognised and checked by
``sessions.services.conversation_import``. It becomes a new conversation of the uploader's.

A POST form with a CSRF token, like every form here. A body over ``MAX_IMPORT_BYTES`` is refused
from its declared length before it is read. On success the browser goes to the new conversation;
on a refusal, back to the home page with the reason (the bad field's path first, such as
``messages[3].role``) as a message, and nothing was written. What the import changed or left
out (``import_notes``: a model that cannot run here, say) is said with the success.
"""
from __future__ import annotations

from django import forms
from django.contrib import messages as flash
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_POST

from sessions.services.attachments import human_size
from sessions.services.conversation_import import MAX_IMPORT_BYTES, ImportRefused, import_document

MULTIPART_SLACK = 64 * 1024  # the form's own bytes around the file


class ImportForm(forms.Form):
    file = forms.FileField(label="Conversation file (JSON)", allow_empty_file=False,
                           error_messages={"required": "Choose a file to import.",
                                           "empty": "The file is empty.",
                                           "invalid": "No file was sent."})


def _refused(request, text: str):
    flash.error(request, f"Nothing was imported: {text}")
    return redirect("home")


def _too_large(size: int) -> str:
    return f"the file is {human_size(size)}; an import may be at most {human_size(MAX_IMPORT_BYTES)}."


@require_POST
def conversation_import(request):
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_IMPORT_BYTES + MULTIPART_SLACK:  # refused before the body is read
        return _refused(request, _too_large(length))
    form = ImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return _refused(request, " ".join(form.errors.get("file", ["The form was incomplete."])))
    upload = form.cleaned_data["file"]
    if upload.size > MAX_IMPORT_BYTES:
        return _refused(request, _too_large(upload.size))
    try:
        conversation = import_document(upload, owner=request.user)
    except ImportRefused as exc:
        return _refused(request, str(exc))
    flash.info(request, " ".join([f"Imported “{conversation.title}”.", *getattr(conversation, "import_notes", [])]))
    return redirect("conversation", conversation_id=conversation.id)


urlpatterns = [
    path("conversations/import", conversation_import, name="conversation-import"),
]
