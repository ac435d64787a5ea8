"""Attachments as the API sees them: the real type and pixel size of a base64 image (Pillow reads the
header only), the pages and text of a base64 PDF (pypdf), their tokens, and the API's refusals.

What an image or a PDF costs and which limits apply come from `compression.core.media`, the
formulas the product counts with, so the simulator's usage equals the product's count for the same
attachment. Decoding is remembered by a digest of the base64 text (a conversation resends the same
attachment on every turn).

Refusal texts (`media_problem`), each a 400 `invalid_request_error` (docs/simulator.md, "Images and
documents", says where each comes from):
- `<path>.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`
- `<path>.image.source.base64: image exceeds 5 MB maximum: N bytes > 5242880 bytes` (the base64 length)
- `<path>.image.source.base64: The image was specified using the image/jpeg media type, but the image appears to be a image/png image`
- `Could not process image` (data that is no image at all)
- `<path>.image.source.base64.data: At least one of the image dimensions exceed max allowed size: 8000 pixels`
  (`... max allowed size for many-image requests: 2000 pixels` with more than 20 images)
- `too many images and documents: <images> + <PDF pages> > <100 or 600>`
- `A maximum of <100 or 600> PDF pages may be provided.`
- `<path>.document.source.base64.media_type: Input should be 'application/pdf'`,
  `<path>.pdf.source.base64.data: The PDF specified was not valid.`, `The PDF specified is password protected.`
`<path>` is the block's `messages.<i>.content.<j>`, or `....content.<k>` inside a `tool_result`.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pypdf
from PIL import Image

from compression.core.media import (
    IMAGE_MEDIA_TYPES,
    MANY_IMAGES,
    MANY_IMAGES_MAX_DIMENSION,
    MAX_IMAGE_BASE64_BYTES,
    MAX_IMAGE_DIMENSION,
    MAX_MEDIA_PER_REQUEST_1M,
    PDF_MEDIA_TYPE,
    image_tokens,
    max_media_per_request,
)
from compression.core.tokens import IMAGE_TOKENS

# Pillow's format names -> the media type the API would name (MPO is a multi-picture JPEG).
_MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "MPO": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_CACHE_SIZE = 256


@dataclass(frozen=True)
class ImageInfo:
    media_type: str  # what the bytes are, e.g. "image/png" ("image/bmp" for a format the API refuses)
    width: int
    height: int
    oversize: bool = False  # too many pixels for Pillow to even open: some side is over 8,000 px


@dataclass(frozen=True)
class PdfInfo:
    pages: int
    text: str  # each page's extracted text, pages separated by "\f" (as the upload side extracts it)
    protected: bool = False


class _Memo:
    """Decoded attachments by digest of their base64 text, bounded (cleared when full)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, bytes], Any] = {}
        self._lock = threading.Lock()

    def get(self, kind: str, data: str, decode: Callable[[str], Any]) -> Any:
        key = (kind, hashlib.blake2b(data.encode("ascii", "replace"), digest_size=16).digest())
        if key in self._entries:
            return self._entries[key]
        value = decode(data)
        with self._lock:
            if len(self._entries) >= _CACHE_SIZE:
                self._entries.clear()
            self._entries[key] = value
        return value


_memo = _Memo()


def _raw(data: str) -> bytes | None:
    try:
        return base64.b64decode(data)
    except (ValueError, TypeError):
        return None


def _decode_image(data: str) -> ImageInfo | None:
    raw = _raw(data)
    if not raw:
        return None
    try:
        with Image.open(io.BytesIO(raw)) as img:  # lazy: reads the header, not the pixels
            fmt = str(img.format or "")
            width, height = img.size
    except Image.DecompressionBombError:
        # Over twice Pillow's pixel limit (179 MP): far past 8,000 px on some side.
        return ImageInfo("", 0, 0, oversize=True)
    except Exception:  # not an image Pillow can identify
        return None
    media_type = _MEDIA_TYPES.get(fmt) or Image.MIME.get(fmt) or f"image/{fmt.lower()}"
    return ImageInfo(media_type, width, height)


def image_info(data: object) -> ImageInfo | None:
    """The real type and size of base64 image data; None when it is no image."""
    return _memo.get("image", data, _decode_image) if isinstance(data, str) else None


def pdf_text(reader: pypdf.PdfReader) -> str:
    """Every page's extracted text, pages separated by a form feed: the `_document.text` the upload
    side records, so the product and the simulator count the same text."""
    return "\f".join(page.extract_text() or "" for page in reader.pages)


def _decode_pdf(data: str) -> PdfInfo | None:
    raw = _raw(data)
    if not raw:
        return None
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw))
        if reader.is_encrypted and not reader.decrypt(""):
            return PdfInfo(0, "", protected=True)
        pages = len(reader.pages)
        # Past the largest limit the request is refused anyway: its text is never needed.
        return PdfInfo(pages, pdf_text(reader) if pages <= MAX_MEDIA_PER_REQUEST_1M else "")
    except Exception:  # pypdf raises many kinds on a damaged file
        return None


def pdf_info(data: object) -> PdfInfo | None:
    """Pages and text of base64 PDF data; None when it is not a readable PDF."""
    return _memo.get("pdf", data, _decode_pdf) if isinstance(data, str) else None


def _base64_source(block: Mapping[str, Any]) -> Mapping[str, Any] | None:
    source = block.get("source")
    return source if isinstance(source, Mapping) and source.get("type") == "base64" else None


def image_block_tokens(block: Mapping[str, Any]) -> int:
    """An image block's tokens: `image_tokens` of its real size; a flat `IMAGE_TOKENS` when the
    simulator cannot see the pixels (a URL or file source, data that is no image)."""
    source = _base64_source(block)
    info = image_info(source.get("data")) if source is not None else None
    return image_tokens(info.width, info.height) if info is not None and not info.oversize else IMAGE_TOKENS


def document_block(block: Mapping[str, Any]) -> tuple[str, int] | None:
    """(extracted text, pages) of a base64 PDF document block; None for any other document."""
    source = _base64_source(block)
    info = pdf_info(source.get("data")) if source is not None else None
    return (info.text, info.pages) if info is not None else None


# -- refusals ---------------------------------------------------------------------------------------

IMAGE_UNREADABLE = "Could not process image"
PDF_PROTECTED = "The PDF specified is password protected."


def image_media_type_message(path: str) -> str:
    allowed = ", ".join(f"'{t}'" for t in IMAGE_MEDIA_TYPES[:-1]) + f" or '{IMAGE_MEDIA_TYPES[-1]}'"
    return f"{path}.image.source.base64.media_type: Input should be {allowed}"


def image_bytes_message(path: str, size: int) -> str:
    return f"{path}.image.source.base64: image exceeds 5 MB maximum: {size} bytes > {MAX_IMAGE_BASE64_BYTES} bytes"


def image_mismatch_message(path: str, declared: str, actual: str) -> str:
    return (f"{path}.image.source.base64: The image was specified using the {declared} media type, "
            f"but the image appears to be a {actual} image")


def image_dimensions_message(path: str, many: bool) -> str:
    which = f" for many-image requests: {MANY_IMAGES_MAX_DIMENSION}" if many else f": {MAX_IMAGE_DIMENSION}"
    return f"{path}.image.source.base64.data: At least one of the image dimensions exceed max allowed size{which} pixels"


def too_many_media_message(images: int, pages: int, limit: int) -> str:
    return f"too many images and documents: {images} + {pages} > {limit}"


def pdf_pages_message(limit: int) -> str:
    return f"A maximum of {limit} PDF pages may be provided."


def pdf_media_type_message(path: str) -> str:
    return f"{path}.document.source.base64.media_type: Input should be '{PDF_MEDIA_TYPE}'"


def pdf_invalid_message(path: str) -> str:
    return f"{path}.pdf.source.base64.data: The PDF specified was not valid."


def _media_blocks(body: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, block) of every image and document block, in request order."""
    for i, msg in enumerate(body.get("messages") or ()):
        content = msg.get("content") if isinstance(msg, Mapping) else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(block, Mapping):
                continue
            path = f"messages.{i}.content.{j}"
            if block.get("type") in ("image", "document"):
                yield path, block
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), list):
                for k, part in enumerate(block["content"]):
                    if isinstance(part, Mapping) and part.get("type") in ("image", "document"):
                        yield f"{path}.content.{k}", part


def _document_problem(path: str, block: Mapping[str, Any]) -> tuple[str | None, int]:
    """(refusal or None, pages) of one document block; a document the simulator cannot read
    (a URL or file source) counts one page, a plain-text one none."""
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "text" or kind == "content":
        return None, 0
    if kind != "base64" or not isinstance(source, Mapping):
        return None, 1
    if source.get("media_type") != PDF_MEDIA_TYPE:
        return pdf_media_type_message(path), 0
    info = pdf_info(source.get("data"))
    if info is None:
        return pdf_invalid_message(path), 0
    return (PDF_PROTECTED if info.protected else None), info.pages


def _image_problem(path: str, block: Mapping[str, Any], many: bool) -> str | None:
    source = _base64_source(block)
    if source is None:
        return None  # a URL or file source: the simulator cannot fetch it
    declared, data = source.get("media_type"), source.get("data")
    if declared not in IMAGE_MEDIA_TYPES:
        return image_media_type_message(path)
    if not isinstance(data, str):
        return f"{path}.image.source.base64.data: Input should be a valid string"
    if len(data) > MAX_IMAGE_BASE64_BYTES:
        return image_bytes_message(path, len(data))
    info = image_info(data)
    if info is None:
        return IMAGE_UNREADABLE
    if info.oversize or max(info.width, info.height) > MAX_IMAGE_DIMENSION:
        return image_dimensions_message(path, many=False)
    if info.media_type != declared:
        return image_mismatch_message(path, str(declared), info.media_type)
    if many and max(info.width, info.height) > MANY_IMAGES_MAX_DIMENSION:
        return image_dimensions_message(path, many=True)
    return None


def media_problem(body: Mapping[str, Any], *, context_window: int | None) -> str | None:
    """The API's refusal for the request's images and documents, or None when it accepts them.

    Order: each document (media type, readable, not password protected); the PDF pages, then
    images plus pages, against the window's limit (`max_media_per_request`); then each image
    (media type, base64 size, readable, dimensions, declared type, the many-image dimensions).
    """
    images: list[tuple[str, Mapping[str, Any]]] = []
    pages = 0
    for path, block in _media_blocks(body):
        if block.get("type") == "image":
            images.append((path, block))
            continue
        problem, n = _document_problem(path, block)
        if problem:
            return problem
        pages += n
    limit = max_media_per_request(context_window)
    if pages > limit:
        return pdf_pages_message(limit)
    if len(images) + pages > limit:
        return too_many_media_message(len(images), pages, limit)
    many = len(images) > MANY_IMAGES
    for path, block in images:
        problem = _image_problem(path, block, many)
        if problem:
            return problem
    return None
