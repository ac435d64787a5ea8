"""Images and PDFs: what the Messages API bills and refuses (the documented formulas, written once),
and historical images after a compaction.

Sources (Anthropic's documentation, read late 2026):
- VISION: https://platform.claude.com/docs/en/build-with-claude/vision ("Evaluate image size",
  "Calculate image costs", "General limits").
- PDF: https://platform.claude.com/docs/en/build-with-claude/pdf-support ("Check PDF requirements",
  "Estimate your costs").
The product (``compression.core.tokens``) and the offline simulator (``simulator/``) both count with
these functions, so a gauge and the simulator's usage agree for the same attachment. Pure Python.

Guarantees of ``strip_historical_images(messages)``: the anchor is the newest user message that
carries an image; in every message before it (any role) each image part, nested ones in tool
results included, becomes the text part ``IMAGE_PLACEHOLDER``. No user image, or an anchor at
index 0, changes nothing. Never mutates its input: unchanged messages are returned as the same
objects, changed ones are new dicts without a stale ``_tokens`` count. Idempotent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

# -- what the API bills ---------------------------------------------------------------------------

# VISION: "tokens = (width px * height px)/750".
PIXELS_PER_TOKEN = 750
# VISION: "If your image's long edge is more than 1568 pixels, or your image is more than ~1,600
# tokens, it will first be scaled down, preserving aspect ratio, until it's within the size limits."
MAX_LONG_EDGE = 1568
# "~1,600 tokens" is approximate: the page's own table of the largest sizes left unscaled (1:1
# 1092x1092, 3:4 951x1268, 2:3 896x1344, 9:16 819x1456, 1:2 784x1568) reaches 784x1568 = 1,229,312
# px (1,640 tokens). The budget is read as that largest entry, the higher reading: no size the table
# keeps is ever scaled here, so an image is never counted below what the documentation bills.
MAX_IMAGE_PIXELS = 784 * 1568
# The most one image can cost once scaled: ceil(1,229,312 / 750).
MAX_IMAGE_TOKENS = -(-MAX_IMAGE_PIXELS // PIXELS_PER_TOKEN)
# PDF: "each page is converted into an image, and the same image-based cost calculations are
# applied". The size a page is rendered at is not documented: a page is counted as the largest
# image (the higher reading).
PDF_PAGE_IMAGE_TOKENS = MAX_IMAGE_TOKENS

# -- what the API refuses -------------------------------------------------------------------------

# VISION: the accepted formats ("JPEG, PNG, GIF, and WebP"), as the API's media_type enum names them.
IMAGE_MEDIA_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# VISION: "The maximal dimensions per image are 8000x8000 px. If you submit more than 20 images in
# one API request, this limit is reduced to 2000x2000 px."
MAX_IMAGE_DIMENSION = 8000
MANY_IMAGES = 20
MANY_IMAGES_MAX_DIMENSION = 2000
# VISION: "5 MB per image" on the API. The API measures the base64 string ("image exceeds 5 MB
# maximum: N bytes > 5242880 bytes" answers images whose decoded size is under 5 MB).
MAX_IMAGE_BASE64_BYTES = 5 * 1024 * 1024
# VISION: "100 per request on the API, for models with a 200k-token context window. 600 per request
# on the API, for all other models"; PDF: "Maximum pages per request: 600 (100 when the request's
# context window is under 1M tokens)". Both limits are on the whole request; the API reports them
# together ("too many images and documents: N + M > 100"). A window under 1M gets 100 (the lower
# limit, for the 32K/64K simulator models the documentation does not name).
MAX_MEDIA_PER_REQUEST = 100
MAX_MEDIA_PER_REQUEST_1M = 600
LARGE_CONTEXT_WINDOW = 1_000_000
PDF_MEDIA_TYPE = "application/pdf"


def _positive(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive number of pixels, not {value!r}")
    return value


def image_scaled_size(width: int, height: int) -> tuple[int, int]:
    """The size the API resizes a ``width`` x ``height`` image to before billing it (VISION).

    Unchanged when the long edge is at most ``MAX_LONG_EDGE`` (1568) and the area at most
    ``MAX_IMAGE_PIXELS``; otherwise scaled by the tighter of the two limits, aspect ratio kept, each
    side rounded down (at least 1 px). When the long edge is the limit it becomes exactly 1568.
    """
    w, h = _positive(width, "width"), _positive(height, "height")
    edge_scale = MAX_LONG_EDGE / max(w, h)
    area_scale = math.sqrt(MAX_IMAGE_PIXELS / (w * h))
    if edge_scale >= 1 and area_scale >= 1:
        return w, h
    if edge_scale <= area_scale:  # exact integers: the long edge becomes 1568
        if w >= h:
            return MAX_LONG_EDGE, max(1, h * MAX_LONG_EDGE // w)
        return max(1, w * MAX_LONG_EDGE // h), MAX_LONG_EDGE
    sw, sh = max(1, math.floor(w * area_scale)), max(1, math.floor(h * area_scale))
    while sw * sh > MAX_IMAGE_PIXELS:  # a float that rounded up
        if sw >= sh:
            sw -= 1
        else:
            sh -= 1
    return sw, sh


def image_tokens(width: int, height: int) -> int:
    """Tokens of one image: ``ceil(w * h / 750)`` of its scaled size (``image_scaled_size``).

    Rounded up: the documentation's own figures are ceilings (200x200 "~54" = 53.3 up, 1000x1000
    "~1334" = 1333.3 up, 1092x1092 "~1590" = 1589.95 up). At most ``MAX_IMAGE_TOKENS`` (1,640).
    Models with high-resolution vision (a larger long edge and budget on the newest Opus) are not
    modelled: they would bill more for an image over 1568 px, which the upload side never sends.
    """
    w, h = image_scaled_size(width, height)
    return -(-(w * h) // PIXELS_PER_TOKEN)


def document_tokens(text_tokens: int, pages: int) -> int:
    """Tokens of one PDF: its extracted text's tokens + ``PDF_PAGE_IMAGE_TOKENS`` (1,640) per page.

    PDF "Estimate your costs": "The token count of a PDF file depends on the total text extracted
    from the document as well as the number of pages", with text billed as text and "each page ...
    converted into an image" billed as an image. Where the documentation is silent (the size a page
    is rendered at) the page is counted as the largest image: the higher reading. A page without a
    text layer costs its image alone. Negative arguments count as 0.
    """
    return max(0, int(text_tokens)) + max(0, int(pages)) * PDF_PAGE_IMAGE_TOKENS


def max_media_per_request(context_window: int | None) -> int:
    """Images plus PDF pages one request may carry: 600 with a 1M window, else 100."""
    return MAX_MEDIA_PER_REQUEST_1M if (context_window or 0) >= LARGE_CONTEXT_WINDOW else MAX_MEDIA_PER_REQUEST


# -- content parts --------------------------------------------------------------------------------

# The per-message token cache key. Defined here, the leaf module, and re-exported by ``tokens``.
TOKENS_KEY = "_tokens"
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})


def is_image_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") in _IMAGE_TYPES


def is_media_part(part: Any) -> bool:
    """An image or a document: billed by its own formula, never as the text of its payload."""
    return isinstance(part, Mapping) and (part.get("type") in _IMAGE_TYPES or part.get("type") == "document")


def count_images(content: Any) -> int:
    if isinstance(content, Sequence) and not isinstance(content, str):
        n = 0
        for p in content:
            if is_image_part(p):
                n += 1
            elif isinstance(p, Mapping) and p.get("type") == "tool_result":
                n += count_images(p.get("content"))
        return n
    return 0


def media_parts(content: Any) -> list[Mapping[str, Any]]:
    """Every image and document part of a message's content, those inside tool results included."""
    out: list[Mapping[str, Any]] = []
    if isinstance(content, Sequence) and not isinstance(content, str):
        for p in content:
            if is_media_part(p):
                out.append(p)
            elif isinstance(p, Mapping) and p.get("type") == "tool_result":
                out.extend(media_parts(p.get("content")))
    return out


def image_size_of(part: Mapping[str, Any]) -> tuple[int, int] | None:
    """The ``_image`` width and height the upload side recorded, when both are positive ints."""
    meta = part.get("_image")
    if not isinstance(meta, Mapping):
        return None
    w, h = meta.get("width"), meta.get("height")
    if isinstance(w, int) and isinstance(h, int) and not isinstance(w, bool) and not isinstance(h, bool) and w > 0 < h:
        return w, h
    return None


def attachment_name(part: Any) -> str:
    """The file name the upload side recorded on an image or document part ("" when none)."""
    if not isinstance(part, Mapping):
        return ""
    for key in ("_image", "_document"):
        meta = part.get(key)
        if isinstance(meta, Mapping) and isinstance(meta.get("name"), str) and meta["name"].strip():
            return " ".join(meta["name"].split())
    return ""


# -- historical images after a compaction (as Hermes Agent does; SPEC is silent) -------------------

IMAGE_PLACEHOLDER = "[Attached image — stripped after compression]"


def named_placeholder(name: str) -> str:
    """The placeholder of an image the user attached as ``name``."""
    return f"[Attached image {name} — stripped after compression]"

# The message type passes through: unchanged messages are the caller's own objects.
_M = TypeVar("_M", bound=Mapping[str, Any])


def _strip_parts(content: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in content:
        if is_image_part(part):
            name = attachment_name(part)
            out.append({"type": "text", "text": named_placeholder(name) if name else IMAGE_PLACEHOLDER})
        elif isinstance(part, Mapping) and isinstance(part.get("content"), list) and count_images(part.get("content")):
            out.append({**part, "content": _strip_parts(part["content"])})
        else:
            out.append(part)
    return out


def strip_historical_images(messages: Sequence[_M]) -> list[_M | dict[str, Any]]:
    anchor = next(
        (i for i in range(len(messages) - 1, -1, -1)
         if messages[i].get("role") == "user" and count_images(messages[i].get("content"))),
        None,
    )
    out: list[_M | dict[str, Any]] = list(messages)
    if not anchor:
        return out
    for i in range(anchor):
        content = out[i].get("content")
        if isinstance(content, list) and count_images(content):
            out[i] = {**{k: v for k, v in out[i].items() if k != TOKENS_KEY}, "content": _strip_parts(content)}
    return out
