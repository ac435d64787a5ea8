"""A conversation's exports, for its owner only (another user's conversation is a 404; the login
middleware sends anonymous visitors to the login page):

- ``export.json``: the complete record (``hermes-web/1``, the format that imports back), a download;
- ``export.md``: the readable Markdown transcript, a download;
- ``export``: that transcript as a page, through the project's Markdown renderer.

Every answer is streamed as it is produced, in pieces of about ``STREAM_CHUNK`` bytes, so a long
conversation is never held in memory. Under ASGI (Daphne) the pieces come from an asynchronous
iterator that pulls the next piece in the request's sync thread: Django would otherwise read a
synchronous stream whole into a list before sending it. Downloads carry a file name made from the
title, ``nosniff`` and ``no-store``.
"""
from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Generator, Iterator
from itertools import chain

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, StreamingHttpResponse
from django.template.loader import render_to_string
from django.urls import path
from django.utils.http import content_disposition_header
from django.utils.text import slugify
from django.views.decorators.http import require_GET

from sessions import selectors
from sessions.models import Conversation
from sessions.services.conversation_export import iter_json
from sessions.services.export_markdown import iter_document_html, iter_markdown

STREAM_CHUNK = 64 * 1024  # bytes gathered before a piece is sent
FILENAME_CHARS = 80
# Where the streamed transcript goes in the rendered page (random, so no title can contain it).
_BODY_MARK = f"export-body-{secrets.token_hex(16)}"


def _own(request, conversation_id) -> Conversation:
    conversation = selectors.conversation_get_for_user(user=request.user, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation")
    return conversation


def export_filename(conversation: Conversation, extension: str) -> str:
    """``<title as a slug>-<date started>.<extension>``: ASCII letters, digits and dashes only."""
    slug = slugify(conversation.title)[:FILENAME_CHARS].strip("-") or "conversation"
    return f"{slug}-{conversation.created_at:%Y-%m-%d}.{extension}"


def _gathered(chunks: Iterator[str]) -> Generator[bytes, None, None]:
    """The chunks as UTF-8 pieces of about ``STREAM_CHUNK`` bytes."""
    buffer, size = [], 0
    for chunk in chunks:
        data = chunk.encode("utf-8")
        buffer.append(data)
        size += len(data)
        if size >= STREAM_CHUNK:
            yield b"".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield b"".join(buffer)


def _next_or_none(pieces: Iterator[bytes]) -> bytes | None:
    return next(pieces, None)


async def _gathered_async(chunks: Iterator[str]) -> AsyncIterator[bytes]:
    """``_gathered`` pulled one piece at a time in the request's sync thread (its database
    connection and cursor stay in that thread)."""
    pieces = _gathered(chunks)
    step = sync_to_async(_next_or_none, thread_sensitive=True)
    try:
        while (piece := await step(pieces)) is not None:
            yield piece
    finally:
        await sync_to_async(pieces.close, thread_sensitive=True)()


def _streamed(request, chunks: Iterator[str], content_type: str, filename: str = "") -> StreamingHttpResponse:
    body = _gathered_async(chunks) if isinstance(request, ASGIRequest) else _gathered(chunks)
    response = StreamingHttpResponse(body, content_type=content_type)
    if filename:
        response["Content-Disposition"] = content_disposition_header(True, filename)
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response


@require_GET
def conversation_export_json(request, conversation_id):
    conversation = _own(request, conversation_id)
    return _streamed(request, iter_json(conversation), "application/json",
                     export_filename(conversation, "json"))


@require_GET
def conversation_export_markdown(request, conversation_id):
    conversation = _own(request, conversation_id)
    base_url = request.build_absolute_uri("/").rstrip("/")  # attachment links that work outside the site
    return _streamed(request, iter_markdown(conversation, base_url=base_url), "text/markdown; charset=utf-8",
                     export_filename(conversation, "md"))


@require_GET
def conversation_export_document(request, conversation_id):
    """The page is rendered once around a mark; the transcript is streamed in its place."""
    conversation = _own(request, conversation_id)
    page = render_to_string("sessions/export_document.html", {"conversation": conversation, "body": _BODY_MARK},
                            request=request)
    head, _, tail = page.partition(_BODY_MARK)
    return _streamed(request, chain([head], iter_document_html(conversation), [tail]), "text/html; charset=utf-8")


urlpatterns = [
    path("conversations/<uuid:conversation_id>/export.json", conversation_export_json, name="conversation-export-json"),
    path("conversations/<uuid:conversation_id>/export.md", conversation_export_markdown,
         name="conversation-export-markdown"),
    path("conversations/<uuid:conversation_id>/export", conversation_export_document,
         name="conversation-export-document"),
]
