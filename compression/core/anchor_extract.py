"""The values of one text, kind by kind, for the anchor index: ``_tokens_in`` runs the finder of
every span kind and lets a character belong to one value at most; beside it, the finders of links,
paths and table headers, and the error lines and the sentences stating a preference or a decision.

Guarantees: kinds claim characters in the order url, columns, file, date, id, number, commit, name,
each kind's values in order of appearance; at most ``tables`` table headers are read per text;
a claim costs a binary search, not a comparison with every earlier value. Per-message caps,
redaction and clipping are applied by ``anchors.anchors_of``. Pure; no I/O.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable

from .anchor_dates import _date_spans
from .anchor_ids import _NOT_IDS, _commit_spans, _id_spans, _number_spans
from .anchor_models import _model_spans
from .anchor_names import _name_spans
from .anchor_scan import (
    _DIGIT,
    _DOT_LETTER,
    _LETTER,
    Span,
    Words,
    _lowered,
    _matches,
    _ordered,
    _run,
    _scan,
    _spans,
    _trimmed,
)

# --- links and paths -------------------------------------------------------------------------------
_URL = _scan(
    r"\b(?:https?|s3a?|gs|az|abfss?|wasbs?|hdfs|ftp|sftp|file|postgres(?:ql)?|mysql|rediss?|mongodb(?:\+srv)?|"
    r"amqps?|kafka|ssh|git)://[^\s<>\"'`)\]}]+", gate="://", lower=True)
_FILE = _scan(
    r"(?<![\w/.@-])(?:~/|\.{1,2}/|/)?(?:[\w@.+-]+/)*[\w+-][\w.+-]*\.(?:"
    r"py|pyi|ipynb|txt|md|rst|json|jsonl|ya?ml|toml|cfg|ini|conf|env|lock|csv|tsv|parquet|xml|html?|css|scss|"
    r"js|mjs|cjs|jsx|ts|tsx|vue|svelte|go|rs|java|kt|kts|scala|swift|c|h|cc|cpp|hpp|cs|rb|php|pl|lua|r|sql|sh|"
    r"bash|zsh|ps1|bat|dockerfile|tf|proto|gradle|log|pdf|docx?|xlsx?|pptx?|png|jpe?g|gif|svg|zip|tar|gz|whl)"
    r"(?![\w/-])", gate=_DOT_LETTER, lower=True)
_DIR_PATH = _scan(r"(?<![\w/.@:-])(?:~/|\.{1,2}/|/)?(?:[\w.-]+/){2,}[\w.-]*", gate=re.compile(r"/[\w.-]+/"))
# Rooted paths of any depth: /var/log, ~/notes, ./data.
_ROOTED_PATH = _scan(r"(?:~(?<![\w/.:@~-]~)/|\.(?<![\w/.:@~-]\.)\.?/|/(?<![\w/.:@~-]/))(?:[\w.-]+/)*[\w.-]+/?"
                     r"(?![\w/-])", gate="/")
_WINDOWS_PATH = _scan(r"[A-Za-z](?<![\w].):\\(?:[^\s\\/:*?\"<>|]+\\)*[^\s\\/:*?\"<>|]*", gate=":\\")  # D:\builds\out
_SLASH_END = re.compile(r"/(?![\w/-]|\.\w)")  # the end of a single-level directory: data/
_PRODUCT_JS = re.compile(r"[A-Z][a-z]+\.js")
_SINGLE_DIR = re.compile(r"[A-Za-z_][\w.-]*[\w-]/")
_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_ROOT_DIRS = frozenset(("tmp", "etc", "var", "opt", "usr", "home", "srv", "mnt", "data", "root", "bin", "lib",
                        "app", "workspace", "dev", "proc", "sys", "media", "Users", "Volumes"))

# --- table headers ---------------------------------------------------------------------------------
_COL_ITEM = r"[`'\"]?[a-z_][\w.-]*[`'\"]?"
_COLUMN_LIST = re.compile(  # matched on lower-cased text
    rf"\b(?:columns?|cols|fields|headers?)\b(?P<sep>\s*(?::|=|are|were|is)\s*|\s+)"
    rf"(?P<v>{_COL_ITEM}(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+){_COL_ITEM}){{1,39}})"
)
_JSON_COLUMNS = re.compile(  # matched on lower-cased text
    r"\"(?:columns|cols|fields|headers)\"\s*:\s*\[(?P<v>\s*\"[^\"\n]{1,60}\"(?:\s*,\s*\"[^\"\n]{1,60}\"){1,39}\s*)\]"
)
# "the sheet has Owner, Due Date, Cost": a table's own list of its capitalised or snake_case names
_HOLDER_ITEM = r"(?:[A-Z][\w-]*(?: [A-Z][\w-]*)?|[a-z]\w*_\w+)"
_HOLDER_LIST = _scan(
    r"(?:sheet|spreadsheet|table|csv|export|dataframe|workbook)s?\s+(?:has|have|contains|includes|lists)\s+"
    rf"(?:the\s+)?(?:columns?\s+)?(?P<v>{_HOLDER_ITEM}(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+){_HOLDER_ITEM}){{2,39}})", word=True,
    words=("sheet", "sheets", "spreadsheet", "table", "csv", "export", "dataframe", "workbook"))
_LOWER_CELL = re.compile(r"^[a-z_][a-z0-9_]*$")
_MD_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?$")
_HEADER_CELL = re.compile(r"^[A-Za-z_][\w .()%/#&+-]{0,39}$")
_ALIGNED_SPLIT = re.compile(r"\t| {2,}")
_ALIGNED_CELL = re.compile(r"^[A-Z][A-Z0-9_()%/.-]*(?: [A-Z][A-Z0-9_()%/.-]*)?$")

# --- errors, preferences, decisions ---------------------------------------------------------------
# The patterns below run on lower-cased text (case-insensitive alternations are slow in ``re``).
_ERROR_WORDS = re.compile(
    r"\b(?:error|exception|traceback|failed|failure|fatal|panic|segmentation fault|no such file|not found|"
    r"permission denied|connection refused|timed out|timeout|exit (?:code|status) [1-9]\d*)\b"
)
# Case-sensitive: an exception class before a colon, or an errno name.
_ERROR_SHAPES = re.compile(
    r"\b\w*(?:Error|Exception)\b\s*:|\bE(?:NOENT|ACCES|PERM|CONNREFUSED|CONNRESET|TIMEDOUT|ADDRINUSE|PIPE|"
    r"AGAIN|EXIST|NOTDIR|ISDIR|INVAL|NOSPC|MFILE|HOSTUNREACH|NETUNREACH)\b"
)
_PREFERENCE = re.compile("|".join((
    r"\b(?:i|we)(?:'d| would)?\s+(?:really\s+|much\s+|rather\s+|strongly\s+)?(?:prefer|like|love|hate|dislike|want|"
    r"need|favou?r)\b",
    r"\b(?:i|we)(?:'d| would)\s+(?:much\s+)?(?:rather|go for|opt for)\b",
    r"\b(?:i|we)\s+(?:don't|do not|never)\s+(?:like|want|use)\b|\bi\s+(?:can't|cannot)\s+stand\b",
    r"\b(?:i'm|i am)\s+(?:not\s+)?(?:a\s+(?:big\s+|huge\s+)?fan\s+of|more of an?)\b",
    r"\bplease\s+(?:always|never|don't|do not|keep|avoid|use)\b",
    r"\b(?:always|never)\s+(?:use|write|put|add|run|call|include|send|commit|push|take|book|choose|pick|fly|order)\b",
    r"\b(?:i|we)\s+(?:usually|normally|generally|tend to)\s+(?:go for|pick|choose|take|book|use|order|fly|sit)\b",
    r"\bmy\s+(?:preference|preferred|favou?rite|go-to)\b|\bi'm\s+(?:allergic|vegetarian|vegan)\b|\bavoid\b",
    # "Don't use emojis", "Keep it under a page": a standing instruction opening the sentence
    r"^(?:don't|do not|never)\s+(?:use|add|write|include|send|put|mention|call me)\b",
    r"^keep\s+(?:it|them|answers|replies|responses|everything)\s+(?:under|below|short|brief|concise|simple|to)\b",
    r"\b(?:no more than|at most)\s+\d+\s+[a-z]+",
    # "Aisle seats please": a short noun phrase opening the sentence, then "please"
    r"^(?!(?:can|could|would|will|you|yes|no|ok|okay|and|so|but|then|thanks|cc)\b)[a-z][\w-]*(?:\s+[\w-]+)?,?\s+"
    r"(?<!\bme)(?<!\bit)(?<!\bus)(?<!\bthis)(?<!\bthat)(?<!\bthem)please\b",
    # "Tea over coffee", "trains over planes if possible": one short choice put over another
    r"^(?!(?:it|we|i|you|they|he|she|this|that|there|game)\b)(?![\w' -]*\b(?:it|them|him|her|me|us|went|go|goes|came|"
    r"come|got|get|ran|run|fell|took|take|hand|look|talk|think)\s+over\b)[a-z][\w'-]*(?:\s+[\w'-]+){0,2}\s+over\s+(?!(?:there|here|the|a|an|it|this|that|and|time|again|to)\b)"
    r"[\w'-]+(?:\s+[\w'-]+){0,1}(?:,?\s+(?:if possible|please|any day|every time))?\s*[.!]?$",
    # "use ISO dates in everything you write for me": a standing instruction
    r"\b(?:use|write|format|give|show|call)\b[^\n]{0,160}?\b(?:for me|from now on|going forward|in everything|"
    r"every time)\b",
)))
_DECISION = re.compile("|".join((
    r"\b(?:we|i)\s+(?:have\s+|'ve\s+)?(?:decided|chose|chosen|picked|agreed|settled|committed)\b",
    r"\b(?:we|i)(?:'ll| will| are going to|'re going to)\s+(?:go with|go for|use|pick|choose|keep|switch to|"
    r"stick with|book|take the|opt for|settle on|lock in)\b",
    r"\blet's\s+(?:go with|go for|use|pick|choose|keep|stick with|switch to|book|do|lock in|settle on|opt for|"
    r"make it)\b",
    r"\b(?:we're|we are|i'm|i am)\s+(?:switching|moving|migrating)\s+to\b",
    r"\b(?:the\s+)?decision\s+is\b|\bgo(?:ing)? with\b|\binstead of\b|\bconfirmed\b|\bthe winner is\b",
    r"\bfinal(?:ly)?\s+(?:choice|answer|plan)\b|\bstandardi[sz](?:e|ed|ing)\s+on\b|^settled on\b|"
    r"\block(?:ing|ed)?\s+in\s+the\b",
    # "approved: the second quote", "final decision: we fly": a label opening the sentence
    r"^(?:final\s+)?(?:approved|decided|agreed|decision|chosen|selected|verdict|done deal)\b[\w ]{0,12}:",
    # "pick the larger one", "book the early train": an imperative choice opening the sentence
    r"^(?:(?:ok|okay|then|so),?\s+)?(?:pick|choose|go for|opt for|book)\s+the\s",
    # "OK, the blue one then.", "yes, the corner room": the answer to a choice, a sentence of its own
    r"^(?:yes|yep|yeah|ok|okay|fine|right|alright),?\s+(?!(?:thanks|thank you|whatever|so|and|bye|see you|talk|good|great|"
    r"cool|sure|no|yes|not)\b)(?:the\s+)?[\w'-]+(?:\s+[\w'-]+){0,3},?\s+then\s*[.!]?$",
    r"^(?:yes|yep|yeah|ok|okay|fine|alright),?\s+the\s+(?:[\w'-]+\s+){0,3}(?:one|option|version|plan)\s*[.!]?$",
    # "Plan C it is", "the blue one wins": a short subject, then the verdict, then the clause ends
    r"^(?!(?:how|what|where|wherever|whatever|as|that|so|because|when|if|nobody|no one|everyone)\b)"
    r"[\w'-]+(?:\s+[\w'-]+){0,3}(?<!what)(?<!how)(?<!\bas)(?<!where)(?<!that)(?<!which)\s+(?:it is|wins)\s*"
    r"(?:[,.;!:—-]|$)",
)))
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z]+")


# --- paths -----------------------------------------------------------------------------------------

def _file_spans(text: str, low: str | None) -> list[Span]:
    spans = _spans((_FILE, _DIR_PATH, _ROOTED_PATH, _WINDOWS_PATH), text, low) + _single_dirs(text)
    out = []
    for start, end, value in _trimmed(_ordered(spans)):
        if not _LETTER.search(value) or value.lower() in _NOT_IDS:
            continue  # 14/03/2026 is a date, 1/2/3 a ratio, and/or prose
        if value[0] == "/" and value.count("/") == 1 and value[1:] not in _ROOT_DIRS:
            continue  # "/help" or "/s": a root directory only when it is a known one
        if _PRODUCT_JS.fullmatch(value):
            continue  # Next.js, Node.js: a product, not a file
        out.append((start, end, value))
    return out


def _single_dirs(text: str) -> list[Span]:
    """``data/``: one name and its slash, with nothing path-like on either side."""
    out: list[Span] = []
    if "/" not in text:
        return out
    for match in _SLASH_END.finditer(text):
        end = match.end()
        start = end - 1
        while start > 0 and text[start - 1] in _PATH_CHARS:
            start -= 1
        before = text[start - 1] if start else ""
        if before and (before.isalnum() or before in "/.:@~#$-_"):
            continue
        if _SINGLE_DIR.fullmatch(text, start, end):
            out.append((start, end, text[start:end]))
    return out


# --- table headers ---------------------------------------------------------------------------------

def _column_spans(text: str, low: str | None, tables: int, words: Words = None) -> list[Span]:
    out: list[Span] = []
    lowered = low if low is not None else text.lower()
    listed = "col" in lowered or "field" in lowered or "header" in lowered
    for match in _matches(_COLUMN_LIST, text, low) if listed else ():
        start, end = match.span("v")
        items = _column_items(text[start:end])
        code_like = any("_" in i or "." in i for i in items) or any(q in text[start:end] for q in "`'\"")
        if match.group("sep").strip() in (":", "=") or code_like:
            out.append((start, end, ", ".join(items)))
    if listed and '"' in text:
        for match in _matches(_JSON_COLUMNS, text, low):
            start, end = match.span("v")
            out.append((start, end, ", ".join(_column_items(text[start:end]))))
    for match in _run(_HOLDER_LIST, text, None, words):
        start, end = match.span("v")
        out.append((start, end, ", ".join(_column_items(text[start:end]))))
    if "\n" in text:
        out.extend(_header_rows(text, tables))
    return _ordered(out)


def _column_items(listed: str) -> list[str]:
    items = re.split(r"\s*,\s*(?:and\s+)?|\s+and\s+", listed.strip(), flags=re.I)
    return [i.strip("`'\" ") for i in items if i.strip("`'\" ")]


def _header_rows(text: str, tables: int) -> list[Span]:
    """The header line of each table in ``text``: a markdown header row (above its ``|---|`` rule), a
    CSV/TSV/semicolon header (the first of consecutive lines with as many fields, its fields names,
    not numbers), or an aligned upper-case header (``NAME   READY   STATUS``) with a row under it."""
    out: list[Span] = []
    lines = text.split("\n")
    offset, previous = 0, ""
    for i, line in enumerate(lines[:-1]):
        cells = _header_cells(line, previous, lines[i + 1])
        if cells:
            out.append((offset, offset + len(line), ", ".join(cells)))
            if len(out) >= tables:
                break
        offset += len(line) + 1
        previous = line
    return out


def _header_cells(line: str, previous: str, following: str) -> list[str] | None:
    stripped = line.strip()
    if len(stripped) < 3 or len(stripped) > 2_000:
        return None
    if stripped[0] == "|":
        if not _MD_RULE.match(following.strip()):
            return None
        cells = [c.strip().strip("*_` ") for c in stripped.strip("|").split("|")]
        return cells if len(cells) >= 2 and all(cells) else None
    for delimiter in (",", "\t", ";"):
        count = stripped.count(delimiter)
        if count and following.count(delimiter) == count and previous.count(delimiter) != count:
            cells = [c.strip().strip('"') for c in stripped.split(delimiter)]
            if not all(_HEADER_CELL.match(c) and len(c.split()) <= 4 for c in cells):
                return None
            # Two short words over two more ("Yes, sure" / "Ok, thanks") is prose, not a table.
            return cells if len(cells) >= 3 or _DIGIT.search(following) else None
    if "  " in stripped or "\t" in stripped:
        cells = _ALIGNED_SPLIT.split(stripped)
        if len(cells) >= 3 and all(_ALIGNED_CELL.match(c) for c in cells) and following.strip():
            return cells
        # a data frame's header: lower-case names over a row of as many values (or one more, its index)
        row = _ALIGNED_SPLIT.split(following.strip())
        if len(cells) >= 3 and all(_LOWER_CELL.match(c) for c in cells) and len(row) in (len(cells), len(cells) + 1) \
                and _DIGIT.search(following):
            return cells
    return None


# --- all kinds -------------------------------------------------------------------------------------

def _tokens_in(text: str, tables: int) -> dict[str, list[str]]:
    """Kind → values for the kinds below, in order of appearance; a character belongs to one anchor
    at most, claimed kind by kind in the order below; at most ``tables`` table headers are read."""
    taken = _Claims()
    low = _lowered(text)
    digits = _DIGIT.search(text) is not None  # numbers, hashes, tickets and versions need one
    words = set(_WORD.findall(low if low is not None else text.lower()))
    passes: tuple[tuple[str, Callable[[], list[Span]]], ...] = (
        ("url", lambda: _trimmed(_spans((_URL,), text, low), ".,;:!?")),
        ("columns", lambda: _column_spans(text, low, tables, words)),
        ("file", lambda: _file_spans(text, low)),
        ("date", lambda: _date_spans(text, digits, words)),
        ("id", lambda: _ordered(_id_spans(text, low, digits, words) + _model_spans(text, digits))),
        ("number", lambda: _number_spans(text, low, digits, words)),
        ("commit", lambda: _commit_spans(text) if digits else []),
        ("name", lambda: _name_spans(text)),
    )
    out: dict[str, list[str]] = {kind: [] for kind, _ in passes}
    for kind, spans_of in passes:
        for start, end, value in spans_of():
            if len(value) >= 2 and taken.claim(start, end):
                out[kind].append(value)
    return out


class _Claims:
    """Disjoint claimed ranges of characters, sorted: a claim costs a binary search, so a tool
    result with thousands of values is not compared pair by pair."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def claim(self, start: int, end: int) -> bool:
        """Claim [start, end) unless it overlaps a claimed range."""
        i = bisect_right(self.starts, start)
        if i and self.ends[i - 1] > start or i < len(self.starts) and self.starts[i] < end:
            return False
        self.starts.insert(i, start)
        self.ends.insert(i, end)
        return True


def _error_lines(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if len(stripped) >= 8 and (_ERROR_SHAPES.search(stripped) or _ERROR_WORDS.search(stripped.lower())):
            lines.append(stripped)
    return lines


def _stated(text: str, pattern: re.Pattern[str]) -> list[str]:
    sentences = (s.strip() for s in _SENTENCE.split(text))
    return [s for s in sentences if s and not s.endswith("?") and pattern.search(s.lower())]
