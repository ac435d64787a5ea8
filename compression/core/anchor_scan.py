"""How an anchor pattern is run, shared by the finder of every kind: ``_Scan`` (a compiled
pattern with the cheap checks that let a text skip it), ``_run`` and ``_spans`` to run scans, and
the span helpers ``_ordered`` and ``_trimmed``.

Guarantees:
- ``_run`` yields the pattern's own matches, none when the scan's gate or words are absent from the
  text; a match refused for the character before it is searched again one character later, so it
  never hides a good match that overlaps it.
- A lower-case scan keeps the text's offsets: it runs on the lower-cased text when lower-casing
  keeps every offset, else on the original ignoring case.
- A span is (start, end, value), offsets into the text searched; lists of spans come earliest first
  and, at one start, longest first.
- Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

Span = tuple[int, int, str]  # (start, end of the claimed characters, value)
Words: TypeAlias = "set[str] | None"  # the lower-case words of a text, when known

# --- how a pattern is run --------------------------------------------------------------------------
# The extraction runs over tens of thousands of messages. A pattern that begins with one character
# class or a flat alternation of literals lets ``re`` skip ahead in C; a leading lookbehind makes it
# try every position (3-10x slower). So an anchor pattern begins with what it matches: a character
# class followed by the lookbehind on the character before it (``\d(?<![\w.,]\d)``), or words whose
# preceding character ``_bounded`` checks. Numbers are atomic groups, so a unit that does not
# follow is not tried again at every shorter length.


@dataclass(frozen=True)
class _Scan:
    """How to run ``pattern``: only on a text holding ``gate`` (a substring, or a pattern that must
    be found) and, given ``words``, one of them as a word; on the lower-cased text when ``lower``;
    never where the character just before the match is in ``not_after`` (or a letter, digit or
    ``_`` when ``word``). The value is the group named ``v`` when the pattern has one."""

    pattern: re.Pattern[str]
    gate: str | re.Pattern[str] | None = None
    not_after: str = ""
    word: bool = False
    lower: bool = False
    words: frozenset[str] | None = None


def _scan(pattern: str, *, gate: str | re.Pattern[str] | None = None, not_after: str = "", word: bool = False,
          lower: bool = False, words: Iterable[str] | None = None) -> _Scan:
    return _Scan(re.compile(pattern), gate, not_after, word, lower, frozenset(words) if words is not None else None)


# Character tests shared by several kinds.
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
_DOT_LETTER = re.compile(r"\.[A-Za-z_]")

_IGNORECASE: dict[re.Pattern[str], re.Pattern[str]] = {}


def _lowered(text: str) -> str | None:
    """``text`` lower-cased when that keeps every offset (else None: search the original)."""
    low = text.lower()
    return low if len(low) == len(text) else None


def _ignoring_case(pattern: re.Pattern[str]) -> re.Pattern[str]:
    if pattern not in _IGNORECASE:
        _IGNORECASE[pattern] = re.compile(pattern.pattern, re.I)
    return _IGNORECASE[pattern]


def _matches(pattern: re.Pattern[str], text: str, low: str | None) -> Iterator[re.Match[str]]:
    """Matches of a lower-case ``pattern`` on ``low`` (offsets shared with ``text``), or on ``text``
    ignoring case when lower-casing moved offsets."""
    return pattern.finditer(low) if low is not None else _ignoring_case(pattern).finditer(text)


def _bounded(pattern: re.Pattern[str], text: str, not_after: str, word: bool) -> Iterator[re.Match[str]]:
    """Matches of ``pattern`` whose preceding character is allowed (not in ``not_after``, nor a
    letter, digit or ``_`` when ``word``); a refused match is searched again one character later,
    so it never hides a good one that overlaps it."""
    search = pattern.search
    pos = 0
    while (match := search(text, pos)) is not None:
        start = match.start()
        before = text[start - 1] if start else ""
        if before and (before in not_after or word and (before.isalnum() or before == "_")):
            pos = start + 1
            continue
        yield match
        pos = max(match.end(), start + 1)


def _run(scan: _Scan, text: str, low: str | None = None, words: Words = None) -> Iterator[re.Match[str]]:
    """The matches of ``scan`` in ``text`` (none when its gate is absent, or when ``words``, the
    text's lower-case words, hold none of the scan's); a lower-case scan runs on ``low`` (the same
    offsets), or ignoring case when there is none."""
    gate = scan.gate
    if gate is not None and (gate not in text if isinstance(gate, str) else gate.search(text) is None):
        return iter(())
    if scan.words is not None and words is not None and scan.words.isdisjoint(words):
        return iter(())
    pattern, target = scan.pattern, text
    if scan.lower and low is not None:
        target = low
    elif scan.lower:
        pattern = _ignoring_case(pattern)
    if scan.not_after or scan.word:
        return _bounded(pattern, target, scan.not_after, scan.word)
    return pattern.finditer(target)


def _spans(scans: Iterable[_Scan], text: str, low: str | None = None, words: Words = None) -> list[Span]:
    """Raw matches of ``scans`` (the group named ``v`` when a pattern has one), earliest first and,
    at one start, longest first."""
    found = []
    for scan in scans:
        group = "v" if "v" in scan.pattern.groupindex else 0
        for match in _run(scan, text, low, words):
            start, end = match.span(group)
            found.append((start, end, text[start:end]))
    return _ordered(found)


def _ordered(spans: list[Span]) -> list[Span]:
    spans.sort(key=lambda s: (s[0], -s[1]))
    return spans


def _trimmed(spans: Iterable[Span], strip: str = ".,;:") -> list[Span]:
    """Each span with trailing punctuation let go (its characters stay free for others)."""
    out = []
    for start, _, value in spans:
        value = value.rstrip(strip)
        out.append((start, start + len(value), value))
    return out
