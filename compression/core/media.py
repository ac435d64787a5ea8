"""Historical images after a compaction (as Hermes Agent does; SPEC is silent).

Guarantees of ``strip_historical_images(messages)``: the anchor is the newest user message that
carries an image; in every message before it (any role) each image part, nested ones in tool
results included, becomes the text part ``IMAGE_PLACEHOLDER``. No user image, or an anchor at
index 0, changes nothing. Never mutates its input: unchanged messages are returned as the same
objects, changed ones are new dicts without a stale ``_tokens`` count. Idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from .tokens import TOKENS_KEY, count_images, is_image_part

IMAGE_PLACEHOLDER = "[Attached image — stripped after compression]"

# The message type passes through: unchanged messages are the caller's own objects.
_M = TypeVar("_M", bound=Mapping[str, Any])


def _strip_parts(content: list[Any]) -> list[Any]:
    out: list[Any] = []
    for part in content:
        if is_image_part(part):
            out.append({"type": "text", "text": IMAGE_PLACEHOLDER})
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
