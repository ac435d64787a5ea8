"""``count_labelled``: the exact token count of ``label + " " + text`` from ``text``'s own, so a turn
the summariser reads is measured without tokenising its text a second time (``summary.py``).

The encoder splits text into pieces (pre-tokens) with cl100k_base's pattern and counts each piece
alone; this module reads that pattern to know which pieces a prefix can change. Pure; exact or
None, never an estimate.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .tokens import _CL100K_PAT_STR, count_tokens


@lru_cache(maxsize=4096)
def _short_count(text: str) -> int:
    """``count_tokens`` of a short piece that recurs (a label, a message's first word)."""
    return count_tokens(text)


_pretokens: Any = None


def _pretokenizer() -> Any:
    """cl100k_base's pre-tokenising pattern, with its end anchor read as the end of the text only
    (Python's ``$`` also matches before a final newline; the encoder's does not)."""
    global _pretokens
    if _pretokens is None:
        # tiktoken's own dependency, imported here: ~15 ms at start-up that only a precise count needs.
        import regex  # type: ignore[import-untyped]

        _pretokens = regex.compile(_CL100K_PAT_STR.replace("$", r"\Z"))
    return _pretokens


def count_labelled(label: str, text: str, text_tokens: int) -> int | None:
    """``count_tokens(label + " " + text)`` from ``text_tokens``, the exact ``count_tokens(text)``,
    without tokenising ``text`` again; None when that cannot be known exactly this way.

    The encoder splits text into pieces (pre-tokens) and counts each alone. ``label`` must end in
    punctuation (``"[USER]:"``): the piece that ends it never takes a following space, so the label
    counts alone. The space before ``text`` either joins its first piece or stands alone; the
    pieces after that are the same as in ``text``, since the pattern looks at nothing before a
    match. So only the first piece is counted again, with and without the space; where the space
    would merge more than that first piece, the answer is None and the caller tokenises."""
    if not label or label[-1].isspace() or label[-1].isalnum() or label[-1] == "_":
        return None
    if not text:
        return _short_count(label + " ")
    pattern = _pretokenizer()
    first = pattern.match(text)
    if first is None:
        return None
    head = first.group()
    spaced: int | None
    if head[0].isalpha():  # a run of letters: the space joins it (the pattern's " ?letters")
        spaced = _short_count(" " + head)
    elif head[0].isnumeric():  # up to three digits, which never take a space: it stands alone
        spaced = _short_count(" ") + _short_count(head)
    else:
        spaced = _spaced_pieces(pattern, text, len(head))
    if spaced is None:
        return None
    return _short_count(label) + text_tokens - _short_count(head) + spaced


def _spaced_pieces(pattern: Any, text: str, head: int) -> int | None:
    """The tokens of the pieces ``" " + text`` starts with, up to where ``text``'s first piece (of
    ``head`` characters) ends; None when no piece ends there."""
    spaced, end = 0, 0  # each piece counted alone, as the encoder does
    for match in pattern.finditer(" " + text):
        spaced, end = spaced + _short_count(match.group()), match.end()
        if end >= head + 1:
            break
    return spaced if end == head + 1 else None
