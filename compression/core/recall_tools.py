"""The recall tools, ``context_search(query, limit)`` and ``context_expand(ref, before, after)``: the
agent's way back to everything compacted in its conversation, whatever the engine.

The built-in compressor offers them when the host gives it a ``recall`` and ``context.recall_tools``
is on; the lcm engine always offers them (they define it). Both answer through ``answer_tool_call``.

Guarantees:
- ``tool_schemas()`` returns fresh copies: a caller may change them without changing the next call's.
- ``answer_tool_call`` always returns JSON text and never raises for the model's input: a missing
  or malformed argument, an unknown reference (the recall's ``ValueError``) or a missing recall
  comes back as ``{"error": "<tool>: <what is wrong and what to give>"}``. Numbers are clamped to
  the documented ranges, never refused for being large.
- A search answer holding fewer results than its ``limit`` carries ``"suggestions"`` (words of this
  conversation close to the query's, at most ``SUGGEST_LIMIT``, none of the query's own words) when
  the recall has ``suggest(query, limit)`` and it gives any; a recall without it, or one whose
  ``suggest`` raises, gives an answer without suggestions, never an error.
- Pure: the stored conversation stays behind ``recall`` (an object with ``search(query, limit)``
  and ``expand(ref, before, after)``, optionally ``suggest(query, limit)``).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)

SEARCH_TOOL = "context_search"
EXPAND_TOOL = "context_expand"
TOOL_NAMES = (SEARCH_TOOL, EXPAND_TOOL)
SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT = 5, 20
EXPAND_DEFAULT, EXPAND_MAX = 2, 10
SUGGEST_LIMIT = 8
_SUGGESTION_MAX_CHARS = 60
NOTHING_FOUND = "Nothing compacted matches these words; try other words, or fewer."
TRY_SUGGESTIONS = "The suggestions are words of this conversation close to yours: search again with them."

TOOL_SCHEMAS: tuple[dict[str, Any], ...] = (
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
)


class Recall(Protocol):
    """The host's search over one conversation (``suggest`` is optional and found at call time)."""

    def search(self, query: str, limit: int) -> list[dict[str, Any]]: ...

    def expand(self, ref: str, before: int, after: int) -> dict[str, Any]: ...


def tool_schemas() -> list[dict[str, Any]]:
    """The two tools' schemas (name, description, JSON parameters), fresh copies."""
    return copy.deepcopy(list(TOOL_SCHEMAS))


def answer_tool_call(recall: Recall | None, name: str, args: object) -> str:
    """The JSON answer to one call of ``name`` (one of ``TOOL_NAMES``) with ``args``."""
    if name not in TOOL_NAMES:
        return _error(f"unknown recall tool {name!r}; the recall tools are {', '.join(TOOL_NAMES)}")
    if recall is None:
        return _error(f"{name} is unavailable: this host gives the engine no access to the stored conversation")
    if not isinstance(args, Mapping):
        return _error(f"{name}: the arguments must be a JSON object")
    try:
        if name == SEARCH_TOOL:
            return _search(recall, args)
        return _expand(recall, args)
    except ValueError as exc:  # a bad argument, or a reference that names nothing
        return _error(f"{name}: {exc}")


def _search(recall: Recall, args: Mapping[str, Any]) -> str:
    query = _text_arg(args, "query")
    if not query:
        raise ValueError("needs a query: the words to look for")
    limit = _int_arg(args, "limit", SEARCH_DEFAULT_LIMIT, 1, SEARCH_MAX_LIMIT)
    results = list(recall.search(query, limit))
    answer: dict[str, Any] = {"query": query, "results": results}
    suggestions = suggestions_for(recall, query) if len(results) < limit else []
    if suggestions:
        answer["suggestions"] = suggestions
    if not results:
        answer["note"] = f"{NOTHING_FOUND} {TRY_SUGGESTIONS}" if suggestions else NOTHING_FOUND
    return _json(answer)


def _expand(recall: Recall, args: Mapping[str, Any]) -> str:
    ref = _text_arg(args, "ref")
    if not ref:
        raise ValueError("needs a ref such as m123 (from context_search or the anchor index)")
    before = _int_arg(args, "before", EXPAND_DEFAULT, 0, EXPAND_MAX)
    after = _int_arg(args, "after", EXPAND_DEFAULT, 0, EXPAND_MAX)
    return _json(recall.expand(ref, before, after))


def suggestions_for(recall: object, query: str) -> list[str]:
    """Words the recall suggests for ``query`` (see the module docstring); [] when it cannot."""
    suggest = getattr(recall, "suggest", None)
    if not callable(suggest):
        return []
    try:
        raw = list(suggest(query, limit=SUGGEST_LIMIT) or ())
    except Exception:  # a failing suggestion must not cost the search its answer
        log.warning("the recall could not suggest words for a search", exc_info=True)
        return []
    asked = {word.lower() for word in query.split()}
    out: list[str] = []
    for item in raw:
        word = item.strip()[:_SUGGESTION_MAX_CHARS] if isinstance(item, str) else ""
        if word and word.lower() not in asked and word.lower() not in (w.lower() for w in out):
            out.append(word)
        if len(out) == SUGGEST_LIMIT:
            break
    return out


def _text_arg(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if value is None:
        return ""
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ValueError(f"{key} must be text (got {type(value).__name__})")
    return str(value).strip()


def _int_arg(args: Mapping[str, Any], key: str, default: int, lo: int, hi: int) -> int:
    value = args.get(key, default)
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer")
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{key} must be an integer (got {str(value)[:40]!r})") from None
    return max(lo, min(hi, number))


def _json(answer: Any) -> str:
    return json.dumps(answer, ensure_ascii=False, default=str)


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
