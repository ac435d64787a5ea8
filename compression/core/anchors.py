"""The anchor index: exact strings taken mechanically from compacted turns, each with the
reference of the message it came from, so a summary never paraphrases away a path, a name or a number.

Guarantees:
- ``extract_anchors`` reads each message's own text (its content and tool-call arguments; never a
  summary, never image data) and yields, per message, anchors of these kinds (``KINDS``):
  - ``url``: links and storage or connection URIs (``https://…``, ``s3://bucket/prefix``, ``gs://…``);
  - ``file``: file paths and directories, a single-level one only with its trailing slash (``data/``),
    Windows paths (``D:\\builds\\out``);
  - ``columns``: one list per table header (``columns: a, b``, a CSV/TSV header, a markdown table
    header row, an aligned ``NAME  STATUS`` header, a data frame's lower-case header over its rows,
    ``the sheet has Owner, Due Date, Cost``), its names joined with ``", "``;
  - ``date``: dates as people write them (``14 March 2026``, ``Mar 14th``, ``the 14th of March``,
    ``14/03/2026``, ``on 03/14``, ``March 2026``, ``Q3 2026``, ``FY26``, ``next Tuesday``,
    ``by June``, ``mid-2026``, ``the third of May``); vague words (``tomorrow``, ``next week``) and a
    weekday or a month on its own are not values;
  - ``id``: identifiers — snake/camel/Pascal/dotted names, ticket keys (``OPS-4790``), versions,
    hostnames, IP addresses, e-mail addresses, chat channels (``#sre-oncall``), hardware and model
    ids (``r6i.4xlarge``, ``A100-80GB``, ``gpt-4o-mini``), kebab names with a digit or three parts,
    a value after a label word (``bucket acme-logs-prod``, ``flag checkout-v2``) and back-ticked code;
    codes of capitals and digits (``K7PX2Q``), UUIDs, ARNs and URNs, IBANs, hyphenated digit groups
    of nine digits or more, phone numbers in ``+`` form, UK postcodes, flight numbers after
    ``flight``, ``#412`` (not a colour), the name on a listing's timestamped line; products with
    their model (``Garmin Forerunner 265``, ``HP ProLiant DL380``, ``Netgear GS308E``, ``Zyxel
    XGS-Lite``, ``Lenovo ThinkPad Carbon``), version ranges (``Node 18.2 to 20.1``) and constraints
    (``~> 5.2``, ``lib>=2.1,<3``);
  - ``number``: a number with what it counts — money (``$25k``, ``€1.2M``, ``USD 1,200``,
    ``25 thousand dollars``, ``twelve hundred euros``), quantities with a unit-like noun
    (``3-5 days``, ``12 replicas``, ``€120/night``, ``55-inch``), a unit written on the number
    (``7200rpm``), a count of ten or more (or with decimals) of a plural noun that ends its clause
    (``40 crates,``), money under a money key (``"total_due": 99.90``), ``port 8443``, clock times,
    and ISO dates and timestamps (machine-written, they stay numbers as they always were);
  - ``name``: people, places, organisations and products — a run of two or more capitalised words
    (connectors such as ``da``, ``of the``, ``&`` inside), or one capitalised word when context marks
    it as a name (``with Priya``, ``vendor Fastly``, ``my sister Ines``, ``Hi Priya,``, ``Kenji said``,
    ``Jenkins vs Buildkite``, ``between Podman and Colima``, ``cheaper than Scaleway``, ``we use
    Obsidian``, ``the Leiden office``, ``"city": "Leiden"``, ``2511 Leiden`` in an address); an
    acronym may open a name (``MIT Press``), a legal form close it (``Nordby AS``); the people after
    ``cc`` even in lower case (``cc jo o'neill``).
    A run is cut at common words, so a sentence's first word (``Anyway``, ``Booked``) never joins
    the name after it; weekdays and months are never names (``Monday`` alone is nothing); nothing is
    taken from a markdown heading, a log line (``INFO``, ``ERROR``) or a column-aligned header;
  - ``commit``: commit hashes; ``error``: whole error lines;
  - from the user's messages only, ``preference`` and ``decision``: the sentences stating them
    (``I'd rather have X than Y``, ``X please``, ``X over Y``, ``not a fan of X``, ``don't use X``,
    ``X it is``, ``X wins``, ``pick the X``, ``OK, X then``, ``let's lock in X``, ``approved: X``,
    ``we're standardising on X``).
  Within a kind, anchors come in order of appearance; a character belongs to one anchor at most
  (claimed in the order url, columns, file, date, id, number, commit, name). Each value is
  redacted (a credential never becomes an anchor) and at most ``MAX_VALUE_CHARS`` long; a message
  contributes at most ``PER_MESSAGE`` anchors of each kind.
- ``merge_anchors`` keeps the first occurrence of each (kind, value): an older reference wins.
- ``render_index``/``parse_index`` round-trip (kind, value, reference and role), under
  ``ANCHOR_HEADING``: the values one message gave share a line that names who gave them,
  ``- [m12] user: name Kenji Mori · date March 14 · number €1.2k`` (``[-]`` when the message has no
  reference); a value holding the separator and an anchor whose role is unknown (an older index's)
  have a line of their own, ``- [m12] decision: We fly.``. A shared
  line costs about two thirds of a line each (measured in cl100k tokens on three values), and the
  role it keeps lets the eviction order below hold over every later compaction.
- ``fit_anchors`` drops anchors until the rendered index fits a token budget. Evicted first: what
  the assistant and the tools said (incidental), then anchors whose role is unknown (parsed back from
  an earlier index), then the values the user gave; preferences and decisions go last of all.
  Within one rank, numbers, identifiers, names and dates go before paths, links, commits and column
  lists, those before error lines; then the oldest first.
- Pure; no I/O.

This module holds the index itself; the finders live beside it: ``anchor_scan`` (how a pattern is
run), ``anchor_dates``, ``anchor_names``, ``anchor_ids`` (identifiers, numbers, commits), ``anchor_models``
(products with their models, version ranges and constraints) and
``anchor_extract`` (links, paths, table headers, error lines, statements, and the pass that runs
every finder over one text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from .anchor_extract import _DECISION, _PREFERENCE, _error_lines, _stated, _tokens_in
from .anchor_scan import Span as Span
from .anchor_scan import Words as Words
from .markers import is_summary_message, own_text
from .redact import REDACTED, redact
from .tokens import call_function, count_tokens, tool_calls_of

ANCHOR_HEADING = "## Anchor index"
INDEX_INTRO = (
    "Exact strings from the compacted turns, each line with the reference of the message it came from "
    "(context_expand opens it) and who gave them:"
)
SEPARATOR = " · "
_GROUPED_ROLES = ("user", "assistant", "tool")
MAX_VALUE_CHARS = 200
KINDS = ("preference", "decision", "error", "file", "url", "commit", "id", "number", "name", "date", "columns")
PER_MESSAGE = {"preference": 4, "decision": 4, "error": 4, "file": 8, "url": 6, "commit": 4, "id": 8, "number": 10,
               "name": 6, "date": 6, "columns": 3}
# Eviction order when the index is over budget, within one role rank: lowest first.
_KEEP_PRIORITY = {"number": 1, "id": 1, "name": 1, "date": 1, "url": 2, "file": 2, "commit": 2, "columns": 2,
                  "error": 3, "decision": 4, "preference": 4}
_STATEMENTS = ("preference", "decision")
NO_REF = "-"


@dataclass(frozen=True)
class Anchor:
    kind: str
    value: str
    ref: str | None = None
    role: str = ""  # the role of the message it came from ("" when parsed back from an index)


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


def anchors_of(msg: Mapping[str, object], ref: str | None) -> list[Anchor]:
    """The anchors of one message (none for a summary)."""
    if is_summary_message(msg):
        return []
    text = _source_text(msg)
    if not text:
        return []
    role = str(msg.get("role") or "")
    values = _tokens_in(text, tables=PER_MESSAGE["columns"])
    values["error"] = _error_lines(text)
    if role == "user":
        values["preference"] = _stated(text, _PREFERENCE)
        values["decision"] = [s for s in _stated(text, _DECISION) if s not in values["preference"]]
    out: list[Anchor] = []
    for kind in KINDS:
        seen: set[str] = set()
        for raw in values.get(kind, ()):
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


def _group_key(anchor: Anchor) -> tuple[str, str] | None:
    """The (reference, role) whose shared line holds ``anchor``; None when it has a line of its own."""
    if anchor.role not in _GROUPED_ROLES or SEPARATOR.strip() in anchor.value:
        return None
    return (anchor.ref or NO_REF, anchor.role)


def _lines(anchors: Sequence[Anchor]) -> list[list[int]]:
    """The index's lines as lists of positions in ``anchors``, each line where its first anchor is."""
    lines: list[list[int]] = []
    at: dict[tuple[str, str], int] = {}
    for i, anchor in enumerate(anchors):
        key = _group_key(anchor)
        if key is None:
            lines.append([i])
        elif key in at:
            lines[at[key]].append(i)
        else:
            at[key] = len(lines)
            lines.append([i])
    return lines


def _render_line(members: Sequence[Anchor]) -> str:
    first = members[0]
    key = _group_key(first)
    if key is None:
        return _line(first)
    return f"- [{key[0]}] {key[1]}: " + SEPARATOR.join(f"{a.kind} {a.value}" for a in members)


def render_index(anchors: Sequence[Anchor]) -> str:
    """The index section (empty text when there is no anchor)."""
    if not anchors:
        return ""
    lines = [_render_line([anchors[i] for i in line]) for line in _lines(anchors)]
    return "\n".join([ANCHOR_HEADING, INDEX_INTRO, *lines])


def _parse_line(line: str) -> list[Anchor]:
    match = _INDEX_LINE.match(line.strip())
    if not match:
        return []
    ref, label, value = match.group("ref"), match.group("kind"), match.group("value")
    ref_or_none = None if ref == NO_REF else ref
    if label in KINDS:
        return [Anchor(label, value, ref_or_none)]
    if label not in _GROUPED_ROLES:
        return []
    out = []
    for part in value.split(SEPARATOR):
        kind, _, text = part.partition(" ")
        if kind in KINDS and text.strip():
            out.append(Anchor(kind, text.strip(), ref_or_none, label))
    return out


def parse_index(text: str) -> list[Anchor]:
    """The anchors of an index section inside ``text`` (a summary body), in order."""
    at = text.find(ANCHOR_HEADING)
    if at < 0:
        return []
    return [anchor for line in text[at:].splitlines()[1:] for anchor in _parse_line(line)]


def split_index(body: str) -> tuple[str, str]:
    """(prose, index section) of a summary body."""
    at = body.find("\n" + ANCHOR_HEADING)
    if body.startswith(ANCHOR_HEADING):
        at = 0
    if at < 0:
        return body, ""
    return body[:at].rstrip(), body[at:].strip()


def _role_rank(anchor: Anchor) -> int:
    """0 for incidental anchors (assistant, tools), 1 when the role is unknown, 2 for the user's."""
    if anchor.role == "user":
        return 2
    return 1 if anchor.role == "" else 0


def fit_anchors(anchors: Sequence[Anchor], budget_tokens: int,
                counter: Callable[[str], int] = count_tokens) -> list[Anchor]:
    """The anchors whose rendered index fits ``budget_tokens``, order kept. Evicted first: what the
    assistant and the tools said, then anchors of unknown role, then what the user gave; within a
    rank numbers, identifiers, names and dates, then paths, links and column lists, then errors,
    the oldest first; preferences and decisions go last of all.

    Evictions are sized a value at a time (a shared line's label goes with its last value), the
    estimate's excess over the whole index's exact count taken as constant; the rendered index is
    then counted whole, and more are evicted in the same order while it is still over."""
    kept = list(anchors)
    if not kept or budget_tokens <= 0:
        return []
    exact = counter(render_index(kept))
    if exact <= budget_tokens:
        return kept
    lines = _lines(kept)
    line_of = {i: n for n, line in enumerate(lines) for i in line}
    left = [len(line) for line in lines]
    label_cost = [0 if _group_key(kept[line[0]]) is None
                  else counter(_render_line([kept[line[0]]]).split(": ", 1)[0] + ":") + 1 for line in lines]
    sizes = [counter(_line(a)) + 1 if _group_key(a) is None else counter(f" {a.kind} {a.value}") + 1 for a in kept]
    estimate = counter(f"{ANCHOR_HEADING}\n{INDEX_INTRO}") + 2 + sum(label_cost) + sum(sizes)
    target = budget_tokens + (estimate - exact)
    order = sorted(range(len(kept)), key=lambda i: (kept[i].kind in _STATEMENTS, _role_rank(kept[i]),
                                                    _KEEP_PRIORITY[kept[i].kind], i))
    dropped: set[int] = set()
    position = 0
    while position < len(order) and estimate > target:
        i = order[position]
        position += 1
        dropped.add(i)
        estimate -= sizes[i]
        left[line_of[i]] -= 1
        if left[line_of[i]] == 0:
            estimate -= label_cost[line_of[i]]
    out = [a for i, a in enumerate(kept) if i not in dropped]
    while out and counter(render_index(out)) > budget_tokens:
        dropped.add(order[position])
        position += 1
        out = [a for i, a in enumerate(kept) if i not in dropped]
    return out
