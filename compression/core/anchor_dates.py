"""Dates as people write them (``14 March 2026``, ``Tuesday the 14th``, ``Q3 2026``, ``by June``),
found in one text as spans for the ``date`` kind of the anchor index.

Guarantees: what is and is not a date value is stated in the docstring of ``anchors``; a day is
1-31 and a numeric date has a month of 12 at most (``3/4`` is a fraction; a short ``03/14`` counts
only after a word such as ``on`` or ``by``); spans come in order with trailing punctuation let go.
Pure; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .anchor_scan import Span, Words, _ordered, _run, _scan, _trimmed

_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
}
_LOWER_MONTHS = ("january", "february", "april", "june", "july", "august", "september", "october", "november",
                 "december")  # lower-case "may" and "march" are a verb first
_MONTH_CAPS = ("January|February|March|April|May|June|July|August|September|October|November|December|"
               "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec")
_MONTH_NAMES = _MONTH_CAPS + "|" + "|".join(_LOWER_MONTHS)
_LOWER_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_CAPS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|Mon|Tues|Tue|Wed|Thurs|Thur|Thu|Fri|Sat|Sun"
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:19|20)\d\d(?!\d)"
# 14 March 2026, 14-16 Mar, the 14th of March; 14/03/2026, 03/14/26, 14.03.2026; 03/14 (checked later).
_DAY_FIRST = _scan(
    rf"\d(?<![\w/.:-]\d)\d?(?:{_ORDINAL}(?:\s?[-–]\s?\d\d?{_ORDINAL})?\s(?:of\s)?(?P<month>{_MONTH_NAMES})(?![A-Za-z])\.?"
    rf"(?:,?\s{_YEAR})?|(?P<sep>[/.-])\d\d?(?:(?P=sep)(?:\d\d){{1,2}})?(?!\d))(?![\w-]|[/.]\d)")
# March 14, Mar 14th, 2026, March 14-16; March 2026; a bare month (kept only after "by", "mid-", …).
_AFTER_MONTH = (rf"(?![A-Za-z])\.?(?:\s(?P<day>\d\d?){_ORDINAL}(?:\s?[-–]\s?\d\d?{_ORDINAL})?(?!\d)"
                rf"(?:,?\s{_YEAR})?(?![\w:-])|,?\s{_YEAR}(?![\w-]))?")
_MONTH_FIRST = (_scan(rf"(?:{_MONTH_CAPS}){_AFTER_MONTH}", not_after="/.:-", word=True),
                _scan(rf"(?:{'|'.join(_LOWER_MONTHS)}){_AFTER_MONTH}", not_after="/.:-", word=True,
                      words=_LOWER_MONTHS))
_WEEKDAY = (_scan(rf"(?:{_WEEKDAY_CAPS})(?![A-Za-z])\.?", not_after="/.:-", word=True),
            _scan(rf"(?:{'|'.join(_LOWER_WEEKDAYS)})(?![A-Za-z])", not_after="/.:-", word=True, words=_LOWER_WEEKDAYS))
_MONTH_PREFIXES = frozenset(m[:3] for m in _MONTHS)
_WEEKDAY_GAP = re.compile(r",?\s(?:the\s)?")
_WEEKDAY_DAY = re.compile(r",?\s(?:the\s)?\d\d?(?:st|nd|rd|th)(?![\w-])")  # Tuesday the 14th
_QUARTER = _scan(
    r"Q[1-4](?:\s?(?:FY\s?'?(?:19|20)?\d\d|'\d\d|(?:19|20)\d\d)(?!\d))?(?![\w-])"
    r"|H[12]\s?(?:FY\s?'?(?:19|20)?\d\d|'\d\d|(?:19|20)\d\d)(?![\w-])"
    r"|FY\s?'?(?:19|20)?\d\d(?![\w-])", not_after="-", word=True)
# The twenty-first of March, the third of May 2026: a day written as an ordinal word (on lower-cased text).
_ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth",
                  "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
                  "eighteenth", "nineteenth", "twentieth", "thirtieth")
_WORD_DAY = _scan(
    rf"the (?:(?:twenty|thirty)[- ])?(?:{'|'.join(_ORDINAL_WORDS)}) of (?:{'|'.join(_MONTHS)})(?![a-z])(?:,? {_YEAR})?",
    lower=True, word=True, words=_ORDINAL_WORDS)
_BARE_YEAR = _scan(r"(?:1(?<![\w/.:]1)9|2(?<![\w/.:]2)0)\d\d(?=\s*(?:[.,;:!?)]|\n|$))")
_MONTH_QUALIFIER = re.compile(r"(?<![A-Za-z])(?:early|mid|late|end of|start of|beginning of|middle of|by|until|"
                              r"till|since|before|after|in|during|through)[\s-]$", re.I)
_YEAR_QUALIFIER = re.compile(r"(?<![A-Za-z])(?:since|until|by|in|before|after|end of|early|late|mid)[\s-]$", re.I)
_RELATIVE = re.compile(r"(?<![A-Za-z])(?:next|this|last|coming)\s$", re.I)
_SHORT_DATE_WORD = re.compile(r"(?<![A-Za-z])(?:on|by|until|till|due|from|since|before|after|deadline|dated?)\s+$",
                              re.I)


def _date_spans(text: str, digits: bool, words: Words = None) -> list[Span]:
    """Dates as people write them; see the docstring of ``anchors`` for what is and is not a value."""
    spans: list[Span] = []
    if digits:
        spans += _day_first_dates(text)
        spans += _qualified(text, _run(_BARE_YEAR, text), _YEAR_QUALIFIER)
    spans += _month_first_dates(text, words)
    spans += [(m.start(), m.end(), m.group(0)) for m in _run(_WORD_DAY, text, None, words) if _valid_word_day(m.group(0))]
    if "Q" in text or "H" in text or "FY" in text:
        spans += [(m.start(), m.end(), m.group(0)) for m in _run(_QUARTER, text)
                  if not _numbered_item(text, m.start(), m.end())]
    spans = _with_weekdays(text, _ordered(spans), words)
    return _trimmed(spans, ".,;:")


def _day_first_dates(text: str) -> list[Span]:
    out = []
    for match in _run(_DAY_FIRST, text):
        start, end = match.span()
        value = match.group(0)
        if match.group("month"):
            if not _valid_days(value):
                continue
            if text[max(0, start - 4):start].lower() == "the ":
                start -= 4  # the 14th of March
        elif not _valid_numeric_date(value, match.group("sep")):
            continue
        elif value.count(match.group("sep")) == 1 and not _SHORT_DATE_WORD.search(text, max(0, start - 12), start):
            continue  # a bare 11/12 is as often a ratio as a date
        out.append((start, end, text[start:end]))
    return out


def _valid_word_day(value: str) -> bool:
    """The thirty-first, never the thirty-second; lower-case "may" and "march" are verbs."""
    low = value.lower()
    month = value.split(" of ")[-1].split(",")[0].split(" ")[0]
    if month in ("may", "march"):
        return False
    return "thirty" not in low.replace("thirtieth", "") or "first" in low


def _valid_days(value: str) -> bool:
    return all(1 <= int(d) <= 31 for d in re.findall(r"\d+", value)[:2] if len(d) <= 2)


def _valid_numeric_date(value: str, sep: str) -> bool:
    """dd/mm/yyyy, mm/dd/yy, dd.mm.yyyy, dd-mm-yyyy, or a short dd/mm or mm/dd that cannot be a
    plain fraction (3/4 and 1/12 are not dates, 03/14 and 14/3 are)."""
    parts = value.split(sep)
    first, second = int(parts[0]), int(parts[1])
    if not (1 <= first <= 31 and 1 <= second <= 31 and min(first, second) <= 12):
        return False
    if len(parts) == 3:
        year = parts[2]
        return len(year) == 4 and year[:2] in ("19", "20") or len(year) == 2 and sep == "/"
    if sep != "/":
        return False
    return len(parts[0]) == 2 and len(parts[1]) == 2 or max(first, second) > 12


def _month_first_dates(text: str, words: Words) -> list[Span]:
    out = []
    for match in (m for scan in _MONTH_FIRST for m in _run(scan, text, None, words)):
        start, end = match.span()
        value = match.group(0)
        if match.group("day") is not None and not _valid_days(value):
            continue
        if value.rstrip(".").lower() in _MONTHS:  # a bare month: only "by June", "mid-March", …
            qualifier = _MONTH_QUALIFIER.search(text, max(0, start - 12), start)
            if qualifier is None:
                continue
            start = qualifier.start()
        elif value.rstrip(".").isalpha():
            continue  # a bare abbreviation
        out.append((start, end, text[start:end]))
    return out


def _qualified(text: str, matches: Iterable[re.Match[str]], qualifier: re.Pattern[str]) -> list[Span]:
    """Each match with the qualifier word just before it (``since 2019``); none without one."""
    out = []
    for match in matches:
        start, end = match.span()
        found = qualifier.search(text, max(0, start - 12), start)
        if found is not None:
            out.append((found.start(), end, text[found.start():end]))
    return out


def _with_weekdays(text: str, spans: list[Span], words: Words) -> list[Span]:
    """``spans`` with a weekday in front of a date joined to it (``Tuesday, March 14``), plus
    ``Tuesday the 14th`` and ``next Tuesday``; a weekday alone is no value."""
    by_start = {s[0]: i for i, s in enumerate(spans) if s[2][0].isdigit() or s[2][:3].lower() in _MONTH_PREFIXES}
    extra: list[Span] = []
    for match in (m for scan in _WEEKDAY for m in _run(scan, text, None, words)):
        start, end = match.span()
        relative = _RELATIVE.search(text, max(0, start - 8), start)
        first = relative.start() if relative is not None else start
        gap = _WEEKDAY_GAP.match(text, end)
        joined = by_start.get(gap.end()) if gap is not None else None
        if joined is not None:
            date_end = spans[joined][1]
            spans[joined] = (first, date_end, text[first:date_end])
        elif (day := _WEEKDAY_DAY.match(text, end)) is not None:
            extra.append((first, day.end(), text[first:day.end()]))
        elif relative is not None:
            extra.append((first, end, text[first:end]))
    return _ordered(spans + extra)


def _numbered_item(text: str, start: int, end: int) -> bool:
    """``Q1:`` or ``Q1.`` opening a line is a numbered question, ``H1`` alone a heading level."""
    value = text[start:end]
    if value in ("H1", "H2"):
        return True
    if value[0] != "Q" or len(value) != 2:
        return False
    after = text[end:end + 1]
    return after in (":", ")") or after == "." and (start == 0 or text[start - 1] == "\n")
