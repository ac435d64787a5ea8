"""Files attached to chat messages: images, PDFs and text files.

- ``attachment_store`` checks one uploaded file and stores it as *pending* (no turn yet). The type
  comes from the content, never from the name alone: Pillow opens and verifies PNG, JPEG, GIF and
  WebP images; a PDF must parse with pypdf (not encrypted, at most HERMES_ATTACHMENT_PDF_MAX_PAGES
  pages); a text file is valid UTF-8 without NUL bytes. SVG and HTML posing as images are refused
  (they can carry scripts). Names are sanitised; one holding a path (``/``, ``\\``, ``..``) is
  refused. A refused or failed upload leaves nothing stored: the file is written under a random
  name and renamed into place, and removed again if the row cannot be written.
- ``attachments_claim`` (inside ``turn_submit``'s transaction) gives pending attachments to the new
  turn: only the owner's, of that conversation, still pending, at most HERMES_ATTACHMENTS_PER_MESSAGE.
- ``message_content`` (when the turn starts, on the worker) builds what the model receives: the
  text part, whose text names every attachment on a line of its own, and per image an
  ``image_url`` part scaled down as Anthropic's vision documentation describes (long edge at most
  1568 px and at most ~1,600 tokens at w*h/750: ``compression.core.media.image_scaled_size``), so
  it is billed for exactly the pixels sent and never scaled again; per
  PDF a ``document`` part with its extracted text in ``_document``; a text file is written into
  the conversation's workspace under a free name (never over an existing file).
- Pending attachments never sent are removed after HERMES_ATTACHMENT_PENDING_HOURS: every upload
  sweeps a batch of them (``attachments_sweep``). The files of a deleted row go with it (a signal
  in ``sessions.models``), a deleted conversation's folder with the conversation.
"""
from __future__ import annotations

import base64
import hashlib
import io
import math
import os
import re
import secrets
import unicodedata
import warnings
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from PIL import Image, ImageOps

from compression.core.media import MAX_IMAGE_BASE64_BYTES, PDF_MEDIA_TYPE, image_scaled_size
from sessions.agent.tools.workspace import workspace_root
from sessions.models import Attachment, Conversation, Message, Turn

IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
PDF_TYPE = PDF_MEDIA_TYPE
TEXT_TYPE = "text/plain; charset=utf-8"
MAX_SOURCE_PIXELS = 64_000_000  # decompression bombs: more pixels than any photo is refused
SEND_MAX_BYTES = MAX_IMAGE_BASE64_BYTES * 3 // 4  # the API measures an image's base64 text
THUMB_EDGE = 320
NAME_MAX_CHARS = 120
SWEEP_BATCH = 50
IMAGE_NAMES = frozenset(".png .jpg .jpeg .jpe .gif .webp .bmp .tif .tiff .ico .svg .svgz .heic .heif .avif".split())
NO_TEXT_LAYER = "no text layer: on routes without PDF support the model cannot read it"
_UNSAFE_NAME_CHARS = re.compile(r'[<>:"|?*\x00-\x1f\x7f]')


class AttachmentRefused(Exception):
    """The file cannot be accepted; the text says why and nothing was stored."""

    status = 400


class AttachmentTooLarge(AttachmentRefused):
    status = 413  # Payload Too Large


class AttachmentMissing(AttachmentRefused):
    status = 404  # no such conversation or attachment of this user


class AttachmentUnavailable(Exception):
    """A claimed attachment's stored file is gone when its turn starts."""


def human_size(size: int) -> str:
    """1,000 bytes → "1000 bytes", 1,229 → "1.2 KB", 20 MiB → "20.0 MB"."""
    if size < 1024:
        return f"{size} bytes"
    exponent = min(3, int(math.log(size, 1024)))
    return f"{size / 1024 ** exponent:.1f} {('KB', 'MB', 'GB')[exponent - 1]}"


# Names --------------------------------------------------------------------------------------------

def name_checked(raw: str) -> str:
    """The name to keep: refused when it holds a path, else cleaned (no control or reserved
    characters, no leading dot, at most NAME_MAX_CHARS with its extension kept)."""
    raw = unicodedata.normalize("NFC", str(raw or ""))
    if "/" in raw or "\\" in raw or "\0" in raw or raw.strip() in (".", ".."):
        raise AttachmentRefused(f"The file name “{raw[:80]}” is not accepted: a name cannot hold a path "
                                "(/, \\ or ..). Rename the file and attach it again.")
    name = "".join(c for c in raw if unicodedata.category(c)[0] != "C")
    name = _UNSAFE_NAME_CHARS.sub("_", name)
    name = re.sub(r"\s+", " ", name).strip(" .")
    name = name.lstrip(".") or "attachment"
    if len(name) > NAME_MAX_CHARS:
        stem, ext = os.path.splitext(name)
        ext = ext[:16]
        name = stem[: NAME_MAX_CHARS - len(ext)].rstrip(" .") + ext
    return name


# What a file is, from its content -------------------------------------------------------------------

@dataclass(frozen=True)
class Checked:
    kind: str
    media_type: str
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    has_text: bool = True


def _markup(data: bytes) -> str:
    """"SVG" or "HTML" when the bytes are such markup, else ""."""
    head = data[:2048].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if head.startswith(b"<svg") or (head.startswith((b"<?xml", b"<!doctype svg", b"<!--")) and b"<svg" in head):
        return "SVG"
    if head.startswith((b"<!doctype html", b"<html", b"<head", b"<body", b"<script", b"<iframe")):
        return "HTML"
    return ""


def _image(data: bytes, name: str) -> Checked | None:
    """The image's facts when Pillow recognises it; None when it is not an image at all."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                fmt, (width, height) = im.format, im.size
                if fmt not in IMAGE_TYPES:
                    raise AttachmentRefused(f"“{name}” is a {fmt} image; images must be PNG, JPEG, GIF or WebP. "
                                            "Convert it and attach it again.")
                if width * height > MAX_SOURCE_PIXELS:
                    raise AttachmentRefused(f"“{name}” has {width}×{height} pixels, more than the "
                                            f"{MAX_SOURCE_PIXELS // 1_000_000} megapixels accepted.")
                im.verify()
            with Image.open(io.BytesIO(data)) as im:
                im.load()  # verify() does not decode: a truncated file fails here
                rotated = im.getexif().get(0x0112) in (5, 6, 7, 8)
    except AttachmentRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise AttachmentRefused(f"“{name}” has too many pixels to be opened safely.") from None
    except Image.UnidentifiedImageError:
        return None
    except Exception:
        raise AttachmentRefused(f"“{name}” looks like an image but cannot be read (damaged or cut short).") from None
    if rotated:
        width, height = height, width
    return Checked("image", IMAGE_TYPES[fmt], width=width, height=height)


def _pdf_reader(data: bytes, name: str):
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        encrypted = reader.is_encrypted
        pages = len(reader.pages)
    except Exception:
        raise AttachmentRefused(f"“{name}” starts like a PDF but cannot be read as one (damaged or cut short).") from None
    if encrypted:
        raise AttachmentRefused(f"“{name}” is an encrypted (password-protected) PDF, which the model cannot read. "
                                "Save it without protection and attach it again.")
    if pages == 0:
        raise AttachmentRefused(f"“{name}” is a PDF without pages.")
    return reader, pages


def pdf_texts(data: bytes, name: str = "the PDF") -> list[str]:
    """The text layer of each page (pypdf); "" for a page without one."""
    reader, _ = _pdf_reader(data, name)
    texts = []
    for page in reader.pages:
        try:
            texts.append(page.extract_text() or "")
        except Exception:  # one unreadable page does not make the others unreadable
            texts.append("")
    return texts


def content_checked(data: bytes, name: str, declared: str = "") -> Checked:
    """What the file is, from its bytes; ``AttachmentRefused`` with the reason otherwise."""
    if not data:
        raise AttachmentRefused(f"“{name}” is empty.")
    claims_image = Path(name).suffix.lower() in IMAGE_NAMES or declared.lower().startswith("image/")
    markup = _markup(data)
    if markup and (claims_image or markup == "SVG"):
        raise AttachmentRefused(f"“{name}” is {markup} markup, not a PNG, JPEG, GIF or WebP image. {markup} can carry "
                                "scripts, so it is not accepted as an image; export it as PNG and attach that.")
    image = _image(data, name)
    if image is not None:
        return image
    if data.startswith(b"%PDF-"):
        _, pages = _pdf_reader(data, name)
        limit = settings.HERMES_ATTACHMENT_PDF_MAX_PAGES
        if pages > limit:
            raise AttachmentRefused(f"“{name}” has {pages} pages; a PDF may have at most {limit}.")
        return Checked("pdf", PDF_TYPE, pages=pages, has_text=any(t.strip() for t in pdf_texts(data, name)))
    if claims_image:
        raise AttachmentRefused(f"“{name}” is named like an image but its content is not a PNG, JPEG, GIF or WebP image.")
    if Path(name).suffix.lower() == ".pdf":
        raise AttachmentRefused(f"“{name}” is named like a PDF but its content is not a PDF.")
    if b"\0" not in data:
        try:
            data.decode("utf-8")
            return Checked("text", TEXT_TYPE)
        except UnicodeDecodeError:
            pass
    raise AttachmentRefused(f"“{name}” is not a type that can be attached: images (PNG, JPEG, GIF, WebP), PDFs and "
                            "text files (UTF-8: plain text, Markdown, CSV, JSON, source code) are accepted.")


# Storing -------------------------------------------------------------------------------------------

def _write_new(path: Path, data: bytes) -> None:
    """Write ``data`` at ``path`` whole or not at all (a temporary name, then a rename)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    try:
        with open(tmp, "xb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _thumbnail(data: bytes) -> bytes:
    with Image.open(io.BytesIO(data)) as im:
        im.seek(0)
        small = ImageOps.exif_transpose(im.copy())
    small.thumbnail((THUMB_EDGE, THUMB_EDGE))
    out = io.BytesIO()
    if small.mode in ("RGBA", "LA", "P", "PA"):
        small.convert("RGBA").save(out, "PNG", optimize=True)
    else:
        small.convert("RGB").save(out, "JPEG", quality=82)
    return out.getvalue()


def attachment_store(*, user, conversation_id, upload, name: str | None = None) -> Attachment:
    """Check and store one uploaded file as a pending attachment of the user's conversation.
    ``name`` is the file's name as the browser had it (the multipart file name otherwise)."""
    conversation = Conversation.objects.filter(id=conversation_id, owner=user).first()
    if conversation is None:
        raise AttachmentMissing("No such conversation.")
    attachments_sweep()
    clean = name_checked(name if name is not None else upload.name)
    limit = settings.HERMES_ATTACHMENT_MAX_BYTES
    if upload.size > limit:
        raise AttachmentTooLarge(f"“{clean}” is {human_size(upload.size)}; a file may be at most {human_size(limit)}. "
                                 "Nothing was stored.")
    per_message = settings.HERMES_ATTACHMENTS_PER_MESSAGE
    if attachments_pending(user=user, conversation=conversation).count() >= per_message:
        raise AttachmentRefused(f"A message may carry at most {per_message} attachments; remove one before adding "
                                f"“{clean}”.")
    data = upload.read()
    checked = content_checked(data, clean, getattr(upload, "content_type", "") or "")
    folder = Path(settings.HERMES_ATTACHMENTS_DIR) / str(conversation.id)
    folder.mkdir(parents=True, exist_ok=True)
    row = Attachment(owner=user, conversation=conversation, kind=checked.kind, name=clean, size=len(data),
                     media_type=checked.media_type, width=checked.width, height=checked.height, pages=checked.pages,
                     has_text=checked.has_text, sha256=hashlib.sha256(data).hexdigest(),
                     storage=f"{conversation.id}/{secrets.token_hex(16)}")
    try:
        _write_new(row.path, data)
        if checked.kind == "image":
            _write_new(row.thumbnail_path, _thumbnail(data))
        row.save()
    except BaseException:
        row.files_remove()
        raise
    return row


def attachments_pending(*, user, conversation: Conversation):
    return Attachment.objects.filter(owner=user, conversation=conversation, turn__isnull=True).order_by("id")


def attachment_remove(*, user, conversation_id, attachment_id: int) -> None:
    """Remove a pending attachment (its files once the deletion committed)."""
    row = Attachment.objects.filter(id=attachment_id, owner=user, conversation_id=conversation_id).first()
    if row is None:
        raise AttachmentMissing("No such attachment.")
    if row.turn_id is not None:
        raise AttachmentRefused(f"“{row.name}” was sent with a message and stays with it.")
    row.delete()


def attachments_sweep(*, now=None) -> int:
    """Remove a batch of attachments uploaded more than HERMES_ATTACHMENT_PENDING_HOURS ago and
    never sent (run on every upload). How many went."""
    cutoff = (now or timezone.now()) - timedelta(hours=settings.HERMES_ATTACHMENT_PENDING_HOURS)
    stale = list(Attachment.objects.filter(turn__isnull=True, created_at__lt=cutoff).order_by("id")[:SWEEP_BATCH])
    for row in stale:
        row.delete()
    return len(stale)


def attachment_get_for_user(*, user, attachment_id: int) -> Attachment | None:
    return Attachment.objects.filter(id=attachment_id, owner=user).first()  # another user's: None


# Sending ------------------------------------------------------------------------------------------

def attachment_ids(raw) -> list[int]:
    """The ids a send form carries, in order, each once; ``AttachmentRefused`` for a bad one."""
    ids: list[int] = []
    for value in raw or ():
        value = str(value).strip()
        if not value.isdigit() or len(value) > 18:
            raise AttachmentRefused("The message names an attachment that does not exist; nothing was sent.")
        if int(value) not in ids:
            ids.append(int(value))
    return ids


def attachments_claim(*, user, conversation: Conversation, turn: Turn, ids: list[int]) -> int:
    """Give the pending attachments ``ids`` to ``turn`` (call inside the turn's transaction);
    ``AttachmentRefused`` when one is not the user's, not of this conversation or no longer pending."""
    limit = settings.HERMES_ATTACHMENTS_PER_MESSAGE
    if len(ids) > limit:
        raise AttachmentRefused(f"A message may carry at most {limit} attachments (this one has {len(ids)}); "
                                "remove some and send again. Nothing was sent.")
    if not ids:
        return 0
    claimed = Attachment.objects.filter(id__in=ids, owner=user, conversation=conversation,
                                        turn__isnull=True).update(turn=turn)
    if claimed != len(ids):
        raise AttachmentRefused("An attachment of this message is no longer available (removed, already sent, or "
                                "not yours); remove it and attach the file again. Nothing was sent.")
    return claimed


def attachments_release(turn: Turn) -> int:
    """A turn that never started gives its attachments back (pending again; swept when unused)."""
    return Attachment.objects.filter(turn=turn, message__isnull=True).update(turn=None)


def image_for_model(data: bytes) -> tuple[bytes, str, int, int]:
    """(bytes, media type, width, height) of the image as sent: the original when it needs no
    change, else upright, scaled down and re-encoded (GIF as PNG; JPEG when still too heavy)."""
    with Image.open(io.BytesIO(data)) as im:
        fmt = im.format or ""  # an upload is checked to be one of IMAGE_TYPES' formats
        im.seek(0)
        upright = ImageOps.exif_transpose(im.copy())
        rotated = im.getexif().get(0x0112) not in (None, 1)
    width, height = image_scaled_size(*upright.size)  # the API then never scales it again
    if (width, height) == upright.size and not rotated and len(data) <= SEND_MAX_BYTES:
        return data, IMAGE_TYPES[fmt], width, height
    if (width, height) != upright.size:
        if upright.mode not in ("RGB", "RGBA", "L"):
            upright = upright.convert("RGBA" if "A" in upright.mode or upright.mode == "P" else "RGB")
        upright = upright.resize((width, height), Image.Resampling.LANCZOS)
    out_format = {"JPEG": "JPEG", "WEBP": "WEBP"}.get(fmt, "PNG")
    out = _encoded(upright, out_format)
    if out.tell() > SEND_MAX_BYTES and out_format != "JPEG":
        out_format, out = "JPEG", _encoded(upright, "JPEG")
    return out.getvalue(), IMAGE_TYPES[out_format], width, height


def _encoded(image, fmt: str) -> io.BytesIO:
    """`image` encoded as `fmt`; for JPEG, which has no transparency, flattened onto white first."""
    if fmt == "JPEG" and image.mode != "RGB":
        flat = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    out = io.BytesIO()
    image.save(out, fmt, **({"quality": 88} if fmt in ("JPEG", "WEBP") else {"optimize": True}))
    return out


def _stored(attachment: Attachment) -> bytes:
    try:
        return attachment.path.read_bytes()
    except OSError:
        raise AttachmentUnavailable(f"The attached file “{attachment.name}” is no longer stored, so this message "
                                    "could not be sent. Attach the file again and send the message once more.") from None


def workspace_put(attachment: Attachment, data: bytes) -> str:
    """Write a text attachment into its conversation's workspace under its name, or the first free
    ``name-2.ext``, ``name-3.ext``…: an existing file (or link) is never replaced."""
    root = workspace_root(attachment.conversation.workspace)
    stem, ext = os.path.splitext(attachment.name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    for n in range(1, 1000):
        candidate = attachment.name if n == 1 else f"{stem}-{n}{ext}"
        try:
            fd = os.open(root / candidate, flags, 0o644)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except BaseException:
            (root / candidate).unlink(missing_ok=True)
            raise
        return candidate
    raise AttachmentUnavailable(f"No free name was found for “{attachment.name}” in the workspace.")


def attached_line(attachment: Attachment) -> str:
    size = human_size(attachment.size)
    if attachment.kind == "image":
        return f"[attached image: {attachment.name} ({size})]"
    if attachment.kind == "pdf":
        pages = f"{attachment.pages} page{'s' if attachment.pages != 1 else ''}"
        return f"[attached PDF: {attachment.name} ({pages}, {size}{'' if attachment.has_text else '; ' + NO_TEXT_LAYER})]"
    return f"[attached: {attachment.workspace_name or attachment.name} ({size}) in the workspace]"


def message_content(turn: Turn):
    """What the turn's user message holds: its text alone without attachments, else the text part
    (the text, then a line naming each attachment) and a part per image and per PDF."""
    items = list(turn.attachments.order_by("id"))
    if not items:
        return turn.text
    parts: list[dict] = []
    for a in items:
        data = _stored(a)
        if a.kind == "image":
            sent, media_type, width, height = image_for_model(data)
            parts.append({"type": "image_url",
                          "image_url": {"url": f"data:{media_type};base64,{base64.b64encode(sent).decode()}"},
                          "_image": {"width": width, "height": height, "name": a.name, "attachment": a.id}})
        elif a.kind == "pdf":
            parts.append({"type": "document",
                          "source": {"type": "base64", "media_type": PDF_TYPE, "data": base64.b64encode(data).decode()},
                          "_document": {"name": a.name, "pages": a.pages, "text": "\f".join(pdf_texts(data, a.name)),
                                        "attachment": a.id}})
        elif not a.workspace_name:
            a.workspace_name = workspace_put(a, data)
            a.save(update_fields=["workspace_name"])
    lines = "\n".join(attached_line(a) for a in items)
    return [{"type": "text", "text": f"{turn.text}\n\n{lines}" if turn.text else lines}, *parts]


def attachments_link(turn: Turn, message: Message) -> None:
    Attachment.objects.filter(turn=turn).update(message=message)
