"""Suggestions: when a search finds too little, the conversation's own words closest in spelling to
the query's (character trigrams, as pg_trgm counts them: ``trigrams``, ``trigram_similarity``),
from the word list of migration 0011 (``recall_words``), each checked against the index before it
is given (``suggest_terms``, whose docstring states the guarantees).

The database narrows the candidates (``Backend.vocabulary``, a superset) and hands on the text of
searchable messages; the scoring, the order and the spelling are computed here. The index and the
word list are checked (and rebuilt if missing) before the first suggestion of a process.
"""
from __future__ import annotations

import re
import unicodedata

from django.db import connection

from sessions.services.recall_index import BACKENDS, RecallUnavailable, index_ensure
from sessions.services.recall_terms import _STOPWORDS, search_terms
from sessions.services.recall_words import SUGGEST_MIN_SIMILARITY, words_ensure

SUGGEST_MAX_LIMIT = 20
SUGGEST_QUERY_WORDS = 8  # the first content words of the query that suggestions are sought for
SUGGEST_MIN_CHARS = 3  # shorter query words have too few trigrams to be near anything
SUGGEST_SPELLING_READS = 3  # a word's newest matches read for its spelling before it is given up
_WORD = re.compile(r"[^\W_]+")  # a run of letters and digits: what pg_trgm and FTS5's unicode61 call a word
# Function words (PostgreSQL's English stop list among them, which its search ignores): never a
# useful suggestion.
_SUGGEST_STOPWORDS = _STOPWORDS | frozenset(
    "myself ours ourselves yours yourself yourselves him himself hers herself itself theirs themselves am being "
    "having doing but because until while against between through during after above below down out off over "
    "under further then once here both each few more most other such nor only own same than too very just don "
    "should now also onto upon thus yet via per across around".split()
)


def trigrams(text: str) -> frozenset[str]:
    """pg_trgm's trigrams of ``text``: each run of letters and digits, lower-cased, with two spaces
    before it and one after, cut into every run of three characters."""
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        padded = f"  {word} "
        out.update(padded[i:i + 3] for i in range(len(padded) - 2))
    return frozenset(out)


def trigram_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared trigrams over all trigrams of either (pg_trgm's ``similarity``), 0 for nothing."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _fold(word: str) -> str:
    """Lower case without diacritics, as FTS5's ``remove_diacritics`` stores a word."""
    return "".join(c for c in unicodedata.normalize("NFKD", word.lower()) if not unicodedata.combining(c))


def _suggestion_inputs(query: str) -> tuple[list[str], set[str]]:
    """(the query words suggestions are sought for, every spelling a suggestion must not have)."""
    runs = [w.lower() for w in _WORD.findall(query or "")]
    used = {*runs, *(_fold(w) for w in runs), *(t.lower() for t in search_terms(query))}
    # A word with diacritics is sought as written and without them (SQLite's word list has none).
    sought = [w for r in runs for w in dict.fromkeys([r, _fold(r)])
              if len(w) >= SUGGEST_MIN_CHARS and w not in _SUGGEST_STOPWORDS]
    return list(dict.fromkeys(sought))[:SUGGEST_QUERY_WORDS], used


def _spelling(word: str, text: str) -> str | None:
    """``word`` as it is written in ``text`` (its first whole-word occurrence, any case, diacritics
    as written), or None when ``text`` holds it only in another form (a search matches stems)."""
    match = re.search(rf"(?<![^\W_]){re.escape(word)}(?![^\W_])", text, re.IGNORECASE)
    if match:
        return match.group(0)
    if not text.isascii():  # the word list may hold the word without its diacritics
        return next((run for run in _WORD.findall(text) if _fold(run) == word), None)
    return None


def suggest_terms(*, conversation_id, query: str, limit: int = 8, compacted_only: bool = True) -> list[str]:
    """Up to ``limit`` (at most 20) words of this conversation close in spelling to the query's, best first.

    Guarantees: each word is written so (case and diacritics included) in a searchable original of
    this conversation, a compacted one when ``compacted_only`` (as for the agent's search), and a
    search for it finds that message; none is a word of the query or a stopword (PostgreSQL's
    English stop list included); each is within trigram similarity 0.3 (pg_trgm's measure) of one
    of the query's first 8 words of 3 or more letters that are not stopwords. Best first: highest
    similarity to any of those, then alphabetical (lower case), so the same stored state gives the
    same list. A query without such words (only punctuation, say) gives [] and reads nothing; the
    query's characters reach the database only as parameters and quoted phrases, never as syntax.

    The spelling is the one of the oldest message holding the word when that one is searchable,
    else of the newest holding it among the three newest searchable messages a search for it
    finds (none: the word is left out). Candidates come from
    the conversation's word list (migration 0011), narrowed by the database (SQLite's trigram
    table, pg_trgm, or without it the fragments a close word must hold) and scored here; the best,
    at most three times ``limit`` of them, are checked in order."""
    backend = BACKENDS.get(connection.vendor)
    if backend is None:
        raise RecallUnavailable(f"full-text search needs SQLite or PostgreSQL (this database is {connection.vendor})")
    limit = max(0, min(SUGGEST_MAX_LIMIT, int(limit)))
    sought, used = _suggestion_inputs(query)
    if not sought or not limit:
        return []
    index_ensure()
    words_ensure()
    wanted = [trigrams(w) for w in sought]
    scored = []
    for word, first_id in backend.vocabulary(conversation_id, sought):
        if word in used or _fold(word) in used or word in _SUGGEST_STOPWORDS:
            continue
        score = max(trigram_similarity(trigrams(word), q) for q in wanted)
        if score >= SUGGEST_MIN_SIMILARITY:
            scored.append((-score, word, first_id))
    best = sorted(scored)[:3 * limit]
    # Most words are checked in the oldest message holding them; the rest (that message is not
    # searchable, or no longer holds the word) by a search from there on.
    first = backend.texts(conversation_id, sorted({first_id for _, _, first_id in best}), compacted_only)
    out: list[str] = []
    for _, word, first_id in best:
        spelled = _spelling(word, first[first_id]) if first_id in first else None
        if spelled is None:
            texts = backend.matching_texts(conversation_id, word, compacted_only, SUGGEST_SPELLING_READS, first_id)
            spelled = next((s for s in (_spelling(word, t) for t in texts) if s), None)
        if spelled is not None:
            out.append(spelled)
            if len(out) == limit:
                break
    return out
