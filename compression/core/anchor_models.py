"""Products and their models found in one text as spans for the ``id`` kind of the anchor index:
a maker or product name followed by a model token (``Garmin Forerunner 265``, ``HP ProLiant DL380``,
``Galaxy S24 Plus``, ``Zyxel XGS-Lite``), a product name whose words mix cases (``Sonos Era Pro``
is not, ``Lenovo ThinkPad Carbon`` is), version ranges (``Node 18.2 to 20.1``) and version constraints
(``~> 4.12``, ``^1.4``, ``lib>=2.1,<3``).

Guarantees: a model token is digits with at most three letters after them (``7s``, ``265``), a
letter or three before digits (``R740``, ``DS220+``) or capitals joined to a capitalised word
(``XGS-Lite``); a product name is one to three capitalised words, none of them a common word
(``Step 3``, ``Booked 2``), and one plain capitalised word before a number counts only off a
sentence's start and not before a unit or after a label (``Room 12``); a year is no model. Spans
come in order of appearance. Pure; no I/O.
"""

from __future__ import annotations

import re

from .anchor_ids import _AMOUNT, _CODE_FIRST, _COUNT_LABELS, _YEAR
from .anchor_names import _NOT_NAME, _SENTENCE_END
from .anchor_scan import Span, _ordered, _run, _scan

_BRAND_WORD = r"(?:[A-Z][A-Za-z]+|[a-z][A-Z][A-Za-z]+)"
_MODEL_TOKEN = r"(?:\d{1,5}[A-Za-z]{0,3}\+?|[A-Z]{1,3}\d{1,5}[A-Za-z]{0,3}\+?|[A-Z]{2,5}-[A-Z][a-z]+)"
_MODEL = _scan(
    r"[A-Za-z](?<![\w.@/#$&'’-].)(?:(?<=[A-Z])[A-Za-z]+|(?<=[a-z])[A-Z][A-Za-z]+)"  # opens on a class: anchor_scan
    rf"(?: {_BRAND_WORD}){{0,2}}(?P<token> {_MODEL_TOKEN}(?! \d{{4}}(?!\S)))?(?P<tier>(?: (?:[A-Z][a-z]+|[A-Z]{{2,4}})){{0,2}})"
    r"(?![\w@+-]|[.,'’]\w)")
_MIXED_CASE = re.compile(r"[A-Z][a-z]+[A-Z][a-z]+|[a-z][A-Z][a-z]+")  # ThinkPad, iPad (not GmbH)
_PLAIN_WORD = re.compile(r"[A-Z][a-z]+")
_VERSION_RANGE = _scan(
    r"[A-Z](?<![\w.-].)[A-Za-z]+ v?\d+\.\d+(?:\.\d+)* (?:to|->|→|and|or) v?\d+\.\d+(?:\.\d+)*(?![\w.]|\.\d)",
    gate=re.compile(r"\d\.\d"))
# ~> 5.2 and ^1.4 (a package manager's own notation), or a requirement written on its package: lib>=2.1,<3
_CONSTRAINT = _scan(r"(?:~>|~=|\^)\s?v?\d+(?:\.\d+)+(?![\w.]|\.\d)", gate=re.compile(r"[~^]"))
_REQUIREMENT = _scan(r"[A-Za-z](?<![\w.-].)[\w.-]*(?:\[[\w,-]+\])?(?:==|>=|<=|~=|!=)\d+(?:\.\d+)*"
                     r"(?:,\s?(?:<|>|<=|>=|!=)\d+(?:\.\d+)*)?(?![\w.]|\.\d)", gate="=")


def _model_spans(text: str, digits: bool) -> list[Span]:
    """Products with their models, version ranges and constraints (see the module's docstring)."""
    out: list[Span] = []
    for match in _run(_MODEL, text):
        span = _model_span(text, match)
        if span is not None:
            out.append(span)
    if digits:
        out += [(m.start(), m.end(), m.group(0)) for m in _run(_VERSION_RANGE, text)
                if m.group(0).split(" ")[0].lower() not in _NOT_NAME]
        out += [(m.start(), m.end(), m.group(0)) for scan in (_CONSTRAINT, _REQUIREMENT) for m in _run(scan, text)]
    return _ordered(out)


def _model_span(text: str, match: re.Match[str]) -> Span | None:
    """The product of one candidate run, its leading common words let go; None when it is no product."""
    start, end = match.start(), match.end()
    token = (match.group("token") or "").strip()
    brand_end = match.start("token") if token else match.start("tier")
    words = text[start:brand_end].split(" ")
    while words and words[0].lower() in _NOT_NAME:
        start += len(words.pop(0)) + 1
    if not words or any(w.lower() in _NOT_NAME for w in words) or _CODE_FIRST.pattern.match(text, start):
        return None
    tier = match.group("tier").split()
    if any(w.lower() in _NOT_NAME for w in tier):
        return None
    if not token:
        mixed = any(_MIXED_CASE.match(w) for w in words + tier)
        return (start, end, text[start:end]) if mixed and len(words) + len(tier) >= 2 else None
    if token.isdigit() and not _plain_number_model(text, start, words, token, match.start("token") + 1):
        return None
    return start, end, text[start:end]


def _plain_number_model(text: str, start: int, words: list[str], token: str, token_at: int) -> bool:
    """Whether a bare number after a product name is its model (``Forerunner 265``), not a year, a
    quantity (``Kafka 3 brokers``), a label's number (``Room 12``) or a capitalised sentence start."""
    if _YEAR.fullmatch(token) or _AMOUNT.pattern.match(text, token_at):
        return False
    if len(words) > 1 or not _PLAIN_WORD.fullmatch(words[0]):
        return True
    before = text[max(0, start - 3):start].rstrip(" ")
    initial = not before or before[-1] in _SENTENCE_END
    return not initial and words[0].lower() not in _COUNT_LABELS
