"""The anchor index: exact strings taken mechanically from compacted turns, each with the
reference of the message it came from, so a summary never paraphrases away a path or a number.

Guarantees:
- ``extract_anchors`` reads each message's own text (its content and tool-call arguments; never a
  summary, never image data) and yields, per message, in order of appearance: URLs, file paths,
  commit hashes, identifiers (snake_case, camelCase, dotted names, ticket keys, versions), numbers
  with their units (amounts, percentages, sizes, durations, dates, times, "port 8443"), error
  lines and, from the user's messages only, the sentences stating a preference or a decision.
  Each value is redacted (a credential never becomes an anchor) and at most ``MAX_VALUE_CHARS``
  long; a message contributes at most ``PER_MESSAGE`` anchors of each kind.
- ``merge_anchors`` keeps the first occurrence of each (kind, value): an older reference wins.
- ``render_index``/``parse_index`` round-trip: one anchor per line, ``- [m12] file: src/app.py``
  (``[-]`` when the message has no reference), under ``ANCHOR_HEADING``.
- ``fit_anchors`` drops anchors until the rendered index fits a token budget: what the assistant
  said goes first, then the oldest; preferences and decisions go last.
- Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .markers import is_summary_message, own_text
from .redact import REDACTED, redact
from .tokens import call_function, count_tokens, tool_calls_of

ANCHOR_HEADING = "## Anchor index"
INDEX_INTRO = (
    "Exact strings from the compacted turns, each with the reference of the message it came from "
    "(context_expand opens it):"
)
MAX_VALUE_CHARS = 200
KINDS = ("preference", "decision", "error", "file", "url", "commit", "id", "number")
PER_MESSAGE = {"preference": 4, "decision": 4, "error": 4, "file": 8, "url": 6, "commit": 4, "id": 8, "number": 10}
# Eviction order when the index is over budget: lowest first.
_KEEP_PRIORITY = {"number": 1, "id": 1, "url": 2, "file": 2, "commit": 2, "error": 3, "decision": 4, "preference": 4}
NO_REF = "-"


@dataclass(frozen=True)
class Anchor:
    kind: str
    value: str
    ref: str | None = None
    role: str = ""  # the role of the message it came from ("" when parsed back from an index)


_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]}]+", re.I)
_FILE = re.compile(
    r"(?<![\w/.@-])(?:~/|\.{1,2}/|/)?(?:[\w@.+-]+/)*[\w+-][\w.+-]*\.(?:"
    r"py|pyi|ipynb|txt|md|rst|json|jsonl|ya?ml|toml|cfg|ini|conf|env|lock|csv|tsv|parquet|xml|html?|css|scss|"
    r"js|mjs|cjs|jsx|ts|tsx|vue|svelte|go|rs|java|kt|kts|scala|swift|c|h|cc|cpp|hpp|cs|rb|php|pl|lua|r|sql|sh|"
    r"bash|zsh|ps1|bat|dockerfile|tf|proto|gradle|log|pdf|docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|tar|gz|whl)"
    r"(?![\w/-])",
    re.I,
)
_DIR_PATH = re.compile(r"(?<![\w/.@:-])(?:~/|\.{1,2}/|/)?(?:[\w.-]+/){2,}[\w.-]*")
_COMMIT = re.compile(r"(?<![\w-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(?![\w-])")
_IDENTIFIERS = (
    re.compile(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w-])"),  # snake_case, SCREAMING_CASE
    re.compile(r"(?<![\w.-])[a-z]+(?:[A-Z][a-z0-9]+)+[A-Za-z0-9]*(?![\w-])"),  # camelCase
    re.compile(r"(?<![\w.-])(?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*(?![\w-])"),  # PascalCase, two humps or more
    re.compile(r"(?<![\w.-])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*){2,}(?![\w-])"),  # dotted.module.names
    re.compile(r"(?<![\w-])[A-Z][A-Z0-9]{1,9}-\d{1,7}(?![\w-])"),  # ticket keys: INV-2041
    re.compile(r"(?<![\w.])v?\d+\.\d+\.\d+(?:[-+][\w.]+)?(?![\w.])"),  # versions
)
_UNITS = (
    r"%|‰|ms|µs|us|ns|s|sec|secs|seconds?|mins?|minutes?|h|hrs?|hours?|days?|weeks?|months?|years?|yrs?|"
    r"[kKMGTP]i?B|bytes?|bits?|[kKMG]?bps|[kKMG]?Hz|px|pt|em|rem|dpi|fps|°[CF]|[kKmcµn]?m|km/h|mph|"
    r"[kKm]?g|lbs?|oz|[kKmM]?W|kWh|[kKmM]?V|mAh|[mµ]?[lL]|EUR|USD|GBP|CHF|JPY|CAD|AUD|€|\$|£|"
    r"tokens?|req/s|rps|qps|ops/s|users?|requests?|rows?|records?|items?|lines?|files?|calls?|"
    r"k|K|M|B|bn|million|billion|thousand|x|×|people|guests|seats|nights?|points?|cores?|threads?|GPUs?"
)
_NUMBER = r"\d{1,3}(?:[,\u202f]\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_AMOUNT = re.compile(rf"(?<![\w.,])(?:[$€£]\s?)?(?:{_NUMBER})\s?(?:{_UNITS})(?![\w/])")
_CURRENCY_FIRST = re.compile(rf"(?<![\w.,])[$€£]\s?(?:{_NUMBER})(?:\s?(?:k|K|M|bn|million|billion))?(?![\w])")
_DATE_TIME = re.compile(r"(?<![\w-])(?:\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?|\d{1,2}:\d{2}(?::\d{2})?)(?![\w-])")
# The patterns below run on lower-cased text (case-insensitive alternations are slow in ``re``).
_LABELLED_NUMBER = re.compile(
    r"\b(?:port|pid|pr|issue|ticket|build|release|line|row|room|gate|flight|order|invoice|step|code|pin|"
    r"id|no\.|number|account|extension|error code|exit code|status|http)\s?#?\d+\b"
)
_ERROR_WORDS = re.compile(
    r"\b(?:error|exception|traceback|failed|failure|fatal|panic|segmentation fault|no such file|not found|"
    r"permission denied|connection refused|timed out|timeout|exit (?:code|status) [1-9]\d*)\b"
)
# Case-sensitive: an exception class before a colon, or an errno name.
_ERROR_SHAPES = re.compile(
    r"\b\w*(?:Error|Exception)\b\s*:|\bE(?:NOENT|ACCES|PERM|CONNREFUSED|CONNRESET|TIMEDOUT|ADDRINUSE|PIPE|"
    r"AGAIN|EXIST|NOTDIR|ISDIR|INVAL|NOSPC|MFILE|HOSTUNREACH|NETUNREACH)\b"
)
_PREFERENCE = re.compile(
    r"\b(?:i|we)(?:'d| would)?\s+(?:really\s+|much\s+|rather\s+)?(?:prefer|like|love|hate|dislike|want|need)\b|"
    r"\b(?:i|we)\s+(?:don't|do not|never)\s+(?:like|want|use)\b|\bplease\s+(?:always|never|don't|do not|keep|avoid|use)\b|"
    r"\b(?:always|never)\s+(?:use|write|put|add|run|call|include|send|commit|push)\b|\bmy\s+(?:preference|favou?rite)\b|"
    r"\bi'm\s+(?:allergic|vegetarian|vegan)\b|\bavoid\b"
)
_DECISION = re.compile(
    r"\b(?:we|i)\s+(?:have\s+|'ve\s+)?(?:decided|chose|chosen|picked|agreed|settled|committed)\b|"
    r"\b(?:we|i)(?:'ll| will| are going to|'re going to)\s+(?:go with|use|pick|choose|keep|switch to|stick with|book)\b|"
    r"\blet's\s+(?:go with|use|pick|choose|keep|stick with|switch to|book|do)\b|\b(?:the\s+)?decision\s+is\b|"
    r"\bgo(?:ing)? with\b|\binstead of\b|\bconfirmed\b|\bfinal(?:ly)?\s+(?:choice|answer|plan)\b"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_INDEX_LINE = re.compile(r"^- \[(?P<ref>[^\]\s]+)\] (?P<kind>[a-z]+): (?P<value>.+)$")


def _clip(text: str) -> str:
    text = text.strip().replace("\r", " ").replace("\n", " ")
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _source_text(msg: Mapping[str, object]) -> str:
    parts = [own_text(msg)]
    for call in tool_calls_of(msg):
        fn = call_function(call)
        parts.append(str(fn.get("arguments") or ""))
    return "\n".join(p for p in parts if p)


# A character each pattern needs: a text without it is not scanned (most prose lacks several).
_NEEDS = {_URL: "://", _FILE: ".", _DIR_PATH: "/", _COMMIT: None, _AMOUNT: None, _CURRENCY_FIRST: None,
          _DATE_TIME: None, _IDENTIFIERS[0]: "_", _IDENTIFIERS[3]: ".", _IDENTIFIERS[4]: "-", _IDENTIFIERS[5]: "."}
_DIGIT = re.compile(r"\d")


def _spans(patterns: Iterable[re.Pattern[str]], text: str) -> list[tuple[int, int, str]]:
    found = []
    for pattern in patterns:
        need = _NEEDS.get(pattern, "")
        if need and need not in text:
            continue
        for match in pattern.finditer(text):
            found.append((match.start(), match.end(), match.group(0)))
    found.sort()
    return found


def _free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= s or start >= e for s, e in taken)


def _lowered(text: str) -> str | None:
    """``text`` lower-cased when that keeps every offset (else None: search the original)."""
    low = text.lower()
    return low if len(low) == len(text) else None


def _tokens_in(text: str) -> dict[str, list[str]]:
    """Kind → values, in order of appearance; a character belongs to one anchor at most."""
    out: dict[str, list[str]] = {k: [] for k in KINDS}
    taken: list[tuple[int, int]] = []
    low = _lowered(text)
    text_digits = _DIGIT.search(text) is not None  # numbers, hashes, tickets and versions need one
    labelled = [(m.start(), m.end(), text[m.start():m.end()]) for m in _LABELLED_NUMBER.finditer(low)] \
        if low is not None else _spans((re.compile(_LABELLED_NUMBER.pattern, re.I),), text)
    groups: tuple[tuple[str, list[tuple[int, int, str]]], ...] = (
        ("url", _spans((_URL,), text)),
        ("file", _spans((_FILE, _DIR_PATH), text)),
        ("number", sorted(_spans((_CURRENCY_FIRST, _AMOUNT, _DATE_TIME), text) + labelled) if text_digits else []),
        ("id", _spans(_IDENTIFIERS if text_digits else _IDENTIFIERS[:4], text)),
        ("commit", _spans((_COMMIT,), text) if text_digits else []),
    )
    for kind, spans in groups:
        for start, _, value in spans:
            value = value.rstrip(".,;:")
            if kind == "url":
                value = value.rstrip(".,;:!?")
            if len(value) < 2 or not _free(taken, start, start + len(value)):
                continue
            taken.append((start, start + len(value)))
            out[kind].append(value)
    return out


def _error_lines(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if len(stripped) >= 8 and (_ERROR_SHAPES.search(stripped) or _ERROR_WORDS.search(stripped.lower())):
            lines.append(stripped)
    return lines


def _stated(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text)
            if s.strip() and not s.strip().endswith("?") and pattern.search(s.lower())]


def anchors_of(msg: Mapping[str, object], ref: str | None) -> list[Anchor]:
    """The anchors of one message (none for a summary)."""
    if is_summary_message(msg):
        return []
    text = _source_text(msg)
    if not text:
        return []
    role = str(msg.get("role") or "")
    values = _tokens_in(text)
    values["error"] = _error_lines(text)
    if role == "user":
        values["preference"] = _stated(text, _PREFERENCE)
        values["decision"] = [s for s in _stated(text, _DECISION) if s not in values["preference"]]
    out: list[Anchor] = []
    for kind in KINDS:
        seen: set[str] = set()
        for raw in values[kind]:
            value = _clip(redact(raw))
            secret = REDACTED in value and kind not in ("error", "preference", "decision")
            if not value or secret or value in seen:
                continue
            seen.add(value)
            out.append(Anchor(kind, value, ref, role))
            if len(seen) >= PER_MESSAGE[kind]:
                break
    return out


def extract_anchors(messages: Sequence[Mapping[str, object]], refs: Sequence[str | None] | None = None) -> list[Anchor]:
    """Every anchor of ``messages`` in order; ``refs[i]`` is the reference of ``messages[i]``."""
    out: list[Anchor] = []
    for i, msg in enumerate(messages):
        out.extend(anchors_of(msg, refs[i] if refs is not None and i < len(refs) else None))
    return merge_anchors(out)


def merge_anchors(*groups: Iterable[Anchor]) -> list[Anchor]:
    """The anchors of every group in order, the first of each (kind, value) kept."""
    seen: set[tuple[str, str]] = set()
    out: list[Anchor] = []
    for group in groups:
        for anchor in group:
            key = (anchor.kind, anchor.value)
            if key not in seen:
                seen.add(key)
                out.append(anchor)
    return out


def _line(anchor: Anchor) -> str:
    return f"- [{anchor.ref or NO_REF}] {anchor.kind}: {anchor.value}"


def render_index(anchors: Sequence[Anchor]) -> str:
    """The index section (empty text when there is no anchor)."""
    if not anchors:
        return ""
    return "\n".join([ANCHOR_HEADING, INDEX_INTRO, *(_line(a) for a in anchors)])


def parse_index(text: str) -> list[Anchor]:
    """The anchors of an index section inside ``text`` (a summary body), in order."""
    at = text.find(ANCHOR_HEADING)
    if at < 0:
        return []
    out = []
    for line in text[at:].splitlines()[1:]:
        match = _INDEX_LINE.match(line.strip())
        if match and match.group("kind") in KINDS:
            ref = match.group("ref")
            out.append(Anchor(match.group("kind"), match.group("value"), None if ref == NO_REF else ref))
    return out


def split_index(body: str) -> tuple[str, str]:
    """(prose, index section) of a summary body."""
    at = body.find("\n" + ANCHOR_HEADING)
    if body.startswith(ANCHOR_HEADING):
        at = 0
    if at < 0:
        return body, ""
    return body[:at].rstrip(), body[at:].strip()


def fit_anchors(anchors: Sequence[Anchor], budget_tokens: int,
                counter: Callable[[str], int] = count_tokens) -> list[Anchor]:
    """The anchors whose rendered index fits ``budget_tokens``, order kept. Evicted first: what the
    assistant said, then numbers and identifiers, then paths and links, then errors, and
    preferences and decisions last; within one rank, the oldest."""
    kept = list(anchors)
    if not kept or budget_tokens <= 0:
        return []
    overhead = counter(f"{ANCHOR_HEADING}\n{INDEX_INTRO}") + 2
    sizes = [counter(_line(a)) + 1 for a in kept]
    total = overhead + sum(sizes)
    if total <= budget_tokens:
        return kept
    order = sorted(range(len(kept)), key=lambda i: (kept[i].role != "assistant", _KEEP_PRIORITY[kept[i].kind], i))
    dropped: set[int] = set()
    for i in order:
        if total <= budget_tokens:
            break
        dropped.add(i)
        total -= sizes[i]
    return [a for i, a in enumerate(kept) if i not in dropped] if total <= budget_tokens else []
