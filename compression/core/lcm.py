"""``LcmEngine`` (``context.engine = "lcm"``): lossless context management. It compacts exactly like
the built-in compressor and, in addition, keeps everything compacted within the agent's reach:

- each summary ends with an anchor index (``anchors``): exact strings extracted mechanically from
  the compacted span, each with the reference of the message it came from. The index of the
  previous summary is carried forward, so nothing indexed once is forgotten while the budget
  (``anchor_index_tokens``; by default 4 % of the window, 500–4,000 tokens) holds it;
- two tools, ``context_search(query, limit)`` (ranked snippets with references from everything
  compacted in this conversation) and ``context_expand(ref, before, after)`` (the verbatim
  originals around a reference, bounded), answered through the host's injected ``recall``;
- the summary's prefix says both tools exist.

Guarantees: the compressor's (input never mutated, exactly one summary, never more tokens than the
input: the index shrinks, and disappears if it must, to keep that). The summariser only ever sees
the previous summary's prose, never its tool note or index. Pure: the database stays behind
``recall`` (an object with ``search(query, limit)``, ``expand(ref, before, after)`` and
``context_refs()``, the ``(role, ref)`` of each live message after the system prompt); without
it the tools answer with an error and anchors carry no reference.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .anchors import Anchor, extract_anchors, fit_anchors, merge_anchors, parse_index, render_index, split_index
from .base import CompressionResult
from .compressor import ContextCompressor
from .markers import END_MARKER, SUMMARY_KEY, SUMMARY_PREFIX, is_summary_message, summary_body_of, wrap_summary
from .tokens import TOKENS_KEY

log = logging.getLogger(__name__)

SEARCH_TOOL = "context_search"
EXPAND_TOOL = "context_expand"
SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 5, 20
EXPAND_DEFAULT, EXPAND_MAX = 2, 10
INDEX_WINDOW_SHARE = 0.04
INDEX_MIN_TOKENS, INDEX_MAX_TOKENS = 500, 4_000

RECALL_NOTE = (
    "Nothing compacted is lost: context_search(query, limit) searches every compacted message of this "
    "conversation and returns ranked snippets with message references such as m123, and "
    "context_expand(ref, before, after) returns the original messages around a reference, verbatim. "
    "The anchor index at the end lists exact strings from the compacted turns with their references. "
    "Before answering about an earlier detail that is not in view, search for it."
)

TOOL_SCHEMAS = [
    {
        "name": SEARCH_TOOL,
        "description": (
            "Search the compacted (summarised) part of this conversation by words. Returns up to `limit` "
            "ranked snippets, each with the reference of the message it comes from (e.g. m123). Use it "
            "when a detail from earlier (a value, path, error, decision) is not in the visible context."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for; any of them may match."},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_MAX_LIMIT,
                          "description": f"How many snippets at most (default {SEARCH_DEFAULT_LIMIT})."},
            },
            "required": ["query"],
        },
    },
    {
        "name": EXPAND_TOOL,
        "description": (
            "Read the original messages around a reference from context_search or the anchor index, "
            "verbatim (long messages are cut, and the result says how much was left out)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "ref": {"type": "string", "description": "A message reference such as m123."},
                "before": {"type": "integer", "minimum": 0, "maximum": EXPAND_MAX,
                           "description": f"Messages before it (default {EXPAND_DEFAULT})."},
                "after": {"type": "integer", "minimum": 0, "maximum": EXPAND_MAX,
                          "description": f"Messages after it (default {EXPAND_DEFAULT})."},
            },
            "required": ["ref"],
        },
    },
]

_COMPRESSOR_PARAMS = frozenset(inspect.signature(ContextCompressor.__init__).parameters) - {"self"}


class Recall(Protocol):
    def search(self, query: str, limit: int) -> list[dict[str, Any]]: ...

    def expand(self, ref: str, before: int, after: int) -> dict[str, Any]: ...

    def context_refs(self) -> Sequence[tuple[str, str | None]]: ...


def lcm_summary_text(prose: str, index: str) -> str:
    """The full summary text: the prefix with the tools' note, the prose, the index, the end marker."""
    parts = [f"{SUMMARY_PREFIX} {RECALL_NOTE}", prose.strip()]
    if index:
        parts.append(index)
    return "\n\n".join([*parts, END_MARKER])


def split_lcm_body(body: str) -> tuple[str, str]:
    """(prose, index section) of a summary body written by this engine (or any other)."""
    text = body.strip()
    if text.startswith(RECALL_NOTE):
        text = text[len(RECALL_NOTE):].lstrip()
    return split_index(text)


def _int_arg(args: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = args.get(key, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be an integer (got {str(value)[:40]!r})") from None
    return max(lo, min(hi, number))


def _error(message: str) -> str:
    return json.dumps({"error": message})


class LcmEngine(ContextCompressor):
    name = "lcm"
    description = ("The built-in compressor plus an anchor index in every summary and context_search / "
                   "context_expand tools over everything compacted.")

    def __init__(self, context_length: int, *, recall: Recall | None = None, anchor_index_tokens: int | None = None,
                 **kwargs: Any) -> None:
        """``recall``: the host's search over this conversation (see the module docstring).
        ``anchor_index_tokens``: the index's budget. Other keywords are the compressor's; unknown
        ones are ignored, as the engine contract says."""
        super().__init__(context_length, **{k: v for k, v in kwargs.items() if k in _COMPRESSOR_PARAMS})
        self.recall = recall
        self.configured_anchor_index_tokens = anchor_index_tokens

    @property
    def anchor_index_tokens(self) -> int:
        if self.configured_anchor_index_tokens is not None:
            return max(0, int(self.configured_anchor_index_tokens))
        return max(INDEX_MIN_TOKENS, min(INDEX_MAX_TOKENS, int(self.context_length * INDEX_WINDOW_SHARE)))

    # The summariser reads the previous summary's prose only ------------------------------------

    def _find_previous_summary(self, messages: Sequence[Mapping[str, Any]]) -> str | None:
        body = super()._find_previous_summary(messages)
        if body is None:
            return None
        return split_lcm_body(body)[0] or None

    def _previous_anchors(self, messages: Sequence[Mapping[str, Any]]) -> list[Anchor]:
        for msg in reversed(messages):
            if is_summary_message(msg):
                return parse_index(summary_body_of(msg))
        return []

    def _refs(self, messages: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """The reference of each message, from the host (None for all when it cannot say)."""
        refs: list[str | None] = [None] * len(messages)
        if self.recall is None:
            return refs
        try:
            live = list(self.recall.context_refs())
        except Exception:
            log.exception("recall could not list the context's references")
            return refs
        offset = 1 if messages and messages[0].get("role") == "system" else 0
        body = messages[offset:]
        if len(live) != len(body) or any(role != m.get("role") for (role, _), m in zip(live, body)):
            log.warning("the context's references do not match the messages being compacted; anchors carry none")
            return refs
        for i, (_, ref) in enumerate(live):
            refs[offset + i] = ref
        return refs

    def compress(
        self,
        messages: Sequence[dict[str, Any]],
        current_tokens: int | None = None,
        focus_topic: str | None = None,
        force: bool = False,
        **kwargs: Any,
    ) -> CompressionResult:
        previous = self._previous_anchors(messages)
        plan = self._plan(messages)  # the same plan the compressor makes: state is unchanged until it runs
        fresh: list[Anchor] = []
        if plan.bounds.has_content:
            refs = self._refs(messages)
            start, end = plan.bounds.start, plan.bounds.end
            fresh = extract_anchors(messages[start:end], refs[start:end])
        result = super().compress(messages, current_tokens, focus_topic, force, **kwargs)
        if not result.compressed:
            return result
        return self._annotate(result, merge_anchors(previous, fresh))

    def _annotate(self, result: CompressionResult, anchors: list[Anchor]) -> CompressionResult:
        prose = self.previous_summary or ""
        old_text = wrap_summary(prose)
        at = next((i for i, m in enumerate(result.messages) if m.get(SUMMARY_KEY)), None)
        if at is None:
            return result
        budget = self.anchor_index_tokens
        while True:
            kept = fit_anchors(anchors, budget)
            index = render_index(kept)
            text = lcm_summary_text(prose, index)
            replaced = _replace_summary(result.messages[at], old_text, text)
            if replaced is None:
                log.warning("the summary message has an unexpected shape; it is left without an anchor index")
                return result
            replaced[TOKENS_KEY] = self._tokens({k: v for k, v in replaced.items() if k != TOKENS_KEY})
            out = [*result.messages[:at], replaced, *result.messages[at + 1:]]
            tokens_after = self.count_messages_tokens(out)
            if tokens_after <= result.tokens_before or (not index and budget == 0):
                break
            budget = 0 if budget <= INDEX_MIN_TOKENS // 2 else budget // 2  # shrink until the result is smaller
        if tokens_after > result.tokens_before:
            return result  # even the note does not fit: the compressor's result stands
        body = text[len(SUMMARY_PREFIX):].split(END_MARKER, 1)[0].strip()
        self.previous_summary = body
        return dataclasses.replace(result, messages=out, summary=text, tokens_after=tokens_after)

    # Tools ------------------------------------------------------------------------------------

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        return [dict(schema) for schema in TOOL_SCHEMAS]

    def handle_tool_call(self, name: str, args: dict[str, Any], **ctx: Any) -> str:
        if name not in (SEARCH_TOOL, EXPAND_TOOL):
            return super().handle_tool_call(name, args, **ctx)
        if self.recall is None:
            return _error(f"{name} is unavailable: this host gives the engine no access to the stored conversation")
        try:
            if name == SEARCH_TOOL:
                query = str(args.get("query") or "").strip()
                if not query:
                    return _error("context_search needs a query: the words to look for")
                limit = _int_arg(args, "limit", SEARCH_DEFAULT_LIMIT, 1, SEARCH_MAX_LIMIT)
                results = list(self.recall.search(query, limit))
                answer: dict[str, Any] = {"query": query, "results": results}
                if not results:
                    answer["note"] = "Nothing compacted matches these words; try other words, or fewer."
                return json.dumps(answer, ensure_ascii=False, default=str)
            ref = str(args.get("ref") or "").strip()
            if not ref:
                return _error("context_expand needs a ref such as m123 (from context_search or the anchor index)")
            before = _int_arg(args, "before", EXPAND_DEFAULT, 0, EXPAND_MAX)
            after = _int_arg(args, "after", EXPAND_DEFAULT, 0, EXPAND_MAX)
            return json.dumps(self.recall.expand(ref, before, after), ensure_ascii=False, default=str)
        except ValueError as exc:  # a bad argument or a reference that names nothing
            return _error(f"{name}: {exc}")


def _replace_summary(msg: Mapping[str, Any], old_text: str, new_text: str) -> dict[str, Any] | None:
    """``msg`` with its summary text ``old_text`` (standalone, or leading a merged message) replaced."""
    content = msg.get("content")
    out = {k: v for k, v in msg.items() if k != TOKENS_KEY}
    if isinstance(content, str) and content.startswith(old_text):
        out["content"] = new_text + content[len(old_text):]
        return out
    if isinstance(content, list) and content and isinstance(content[0], Mapping) and content[0].get("text") == old_text:
        out["content"] = [{**content[0], "text": new_text}, *content[1:]]
        return out
    return None
