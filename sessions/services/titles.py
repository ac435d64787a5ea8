"""Conversation titles as text: the cleaned first line of a message (the title a conversation gets
when its first message is sent), the prompt that asks a model for a short title, and the cleaning
of what the model answers or the user types.

Pure functions of strings, so the rules are testable without a database. A title is one line
(never a line break), whitespace collapsed, markdown and code fences stripped, at most
``TITLE_MAX_CHARS`` characters cut at a word boundary with "…"; a pasted log gives its first
meaningful line (a line with words in it; a leading timestamp dropped).
"""
from __future__ import annotations

import re

from sessions.models import DEFAULT_TITLE  # the title before any is made

TITLE_MAX_CHARS = 60  # a made title
RENAME_MAX_CHARS = 120  # a title the user types
PROMPT_EXCERPT_CHARS = 2_000
ELLIPSIS = "…"

# The simulator recognises this request by its first words and its tags (docs/simulator.md).
TITLE_PROMPT_HEAD = "Write a title for this conversation"
TITLE_PROMPT = (
    TITLE_PROMPT_HEAD + ": at most six words, in the language of the user's message, no quotes and no "
    "full stop. Answer with the title only.\n\n"
    "<first-message>\n{message}\n</first-message>\n\n<first-reply>\n{reply}\n</first-reply>"
)

_FENCE = re.compile(r"^\s*(```|~~~)")
_TIMESTAMP = re.compile(
    r"^\[?\d{4}-\d{2}-\d{2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\]?\s*[-|:]?\s*"
    r"|^\[?\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\]?\s*[-|:]?\s*")
_IMAGE_OR_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
# HTML formatting tags are dropped; anything else in angle brackets (`List<String>`, `<name>`) is
# words the user wrote, kept (titles are always rendered escaped).
_TAG = re.compile(r"</?(?:a|abbr|b|br|code|del|details|div|em|font|h[1-6]|hr|i|img|ins|kbd|li|mark|ol|p|pre|"
                  r"s|small|span|strong|sub|summary|sup|table|tbody|td|th|thead|tr|u|ul)\b[^>]*>", re.I)
_LEAD = re.compile(r"^(?:\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,3}[.)]\s+))+")
_MARKS = re.compile(r"\*\*|__|~~|`")
_EMPHASIS = re.compile(r"(?<![\w*])[*_](?=\S)(.+?)(?<=\S)[*_](?![\w*])")
_RULE = re.compile(r"^\s*([-*_=~#+])\1{2,}\s*$")
_BANNER = re.compile(r"^([-*_=~#+<>])\1{2,}\s*|\s*([-*_=~#+<>])\2{2,}$")  # "==== build 4417 ===="
_WORDS = re.compile(r"[^\W\d_]{2,}")  # two letters in a row: a line that says something
_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]")
_ANSWER_PREFIX = re.compile(r"^(?:conversation\s+)?title\s*[:\-–—]\s*", re.I)
_QUOTES = "\"'“”‘’«»`*_"
_TRAILING = " \t,;:.-–—|"


def one_line(text: str) -> str:
    """Control characters (line breaks included) as spaces, whitespace collapsed."""
    return " ".join(_CONTROL.sub(" ", text or "").split())


def _unmarked(line: str) -> str:
    line = _IMAGE_OR_LINK.sub(r"\1", line)
    line = _TAG.sub(" ", line)
    line = _LEAD.sub("", line)
    line = _MARKS.sub("", line)
    line = _EMPHASIS.sub(r"\1", line)
    line = one_line(line)
    line = _TIMESTAMP.sub("", line)
    line = _BANNER.sub("", line)
    return line.rstrip(_TRAILING).lstrip(" |-:")


def first_meaningful_line(text: str) -> str:
    """The first line with words in it, markdown stripped: prose before code, so a question
    followed by a pasted block gives the question, and a message that is only a code block or a
    log gives its first line that says something."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in (text or "").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if _RULE.match(line):
            continue
        (code if fenced else prose).append(line)
    for line in [*prose, *code]:
        cleaned = _unmarked(line)
        if _WORDS.search(cleaned):
            return cleaned
    return ""


def shorten(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters: cut at the last word boundary that
    keeps a third of it, with "…"."""
    text = one_line(text)
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space >= limit // 3:
        cut = cut[:space]
    return cut.rstrip(_TRAILING) + ELLIPSIS


def title_from_message(text: str) -> str:
    """The title a message gives at once: its cleaned first meaningful line."""
    return shorten(first_meaningful_line(text)) or DEFAULT_TITLE


def title_from_answer(text: str) -> str:
    """A model's answer to ``TITLE_PROMPT`` as a title; "" when it holds none."""
    line = _ANSWER_PREFIX.sub("", first_meaningful_line(text))
    line = line.strip(_QUOTES + " ").rstrip(_TRAILING).strip(_QUOTES + " ")
    return shorten(line) if _WORDS.search(line) else ""


def title_prompt(message: str, reply: str) -> str:
    def excerpt(text: str) -> str:
        text = (text or "").strip()
        return text if len(text) <= PROMPT_EXCERPT_CHARS else text[:PROMPT_EXCERPT_CHARS] + ELLIPSIS

    return TITLE_PROMPT.format(message=excerpt(message), reply=excerpt(reply))
