"""A query's words, as the search reads them (``search_terms``): runs of characters between spaces,
quotes, brackets and punctuation, stopwords dropped unless nothing else is left.

Guarantees: at most ``SEARCH_MAX_TERMS`` words of at most ``TERM_MAX_CHARS`` characters each, no
word twice (case aside), in the query's order; the same query always gives the same words. The
stopwords are shared with the suggestions (``recall_suggest``), which never offer one.
"""
from __future__ import annotations

import re

SEARCH_MAX_TERMS = 16
TERM_MAX_CHARS = 100
# A term: a run of characters that are not spaces, quotes, brackets or punctuation; a comma only
# between digits ("42,500" stays one phrase).
_TERM = re.compile(r"(?:[^\s\"'`()\[\]{}<>,;!?*^]|(?<=\d),(?=\d))+")
_STOPWORDS = frozenset(
    "a an the is was were are be been of to in on for and or not what which who whom when where why how do "
    "did does done you your me my i we our us it its that this these those with at by from as about into "
    "there their they them he she his her remember remind tell please can could would should will shall "
    "have has had any some all again earlier before history search find look up".split()
)


def search_terms(query: str) -> list[str]:
    """The words of a query, stopwords dropped unless nothing else is left, at most 16."""
    words: list[str] = []
    for raw in _TERM.findall(query or ""):
        word = raw.strip(".:/-_")[:TERM_MAX_CHARS]
        if word and word.lower() not in (w.lower() for w in words):
            words.append(word)
    content = [w for w in words if w.lower() not in _STOPWORDS]
    return (content or words)[:SEARCH_MAX_TERMS]
