"""The simulator's answer to a title request: a short, deterministic title for a conversation.

A title request is the prompt `sessions.services.titles.TITLE_PROMPT` builds: it starts with
"Write a title for this conversation" and holds the first message between `<first-message>` and
`</first-message>` (then the first reply between `<first-reply>` tags). The title is the first
five words of the message's first line with words in it (code fences and markdown marks
skipped), leaving out common words, the first one capitalised: "can you help me rotate the
deploy key every 30 days?" gives "Help rotate deploy key every".
"""

from __future__ import annotations

import re

HEAD = "Write a title for this conversation"
TITLE_WORDS = 5
_MESSAGE = re.compile(r"<first-message>\n(.*?)\n</first-message>\n\n<first-reply>", re.S)
_FENCE = re.compile(r"^\s*(```|~~~)")
_WORD = re.compile(r"[^\W_][\w'./-]*")
_HAS_LETTERS = re.compile(r"[^\W\d_]{2,}")
_COMMON = frozenset(
    "a an the is was were are be been of to in on for and or what which who when where why how do did does "
    "you your me my i we our it its that this with at by from as about can could would should will please "
    "hi hello hey".split()
)


def is_title_prompt(text: str) -> bool:
    return text.startswith(HEAD) and _MESSAGE.search(text) is not None


def title_for(text: str) -> str:
    """The title for a title request's first message ("Conversation" when it has no words)."""
    match = _MESSAGE.search(text)
    message = match.group(1) if match else ""
    line = next((ln for ln in message.splitlines() if not _FENCE.match(ln) and _HAS_LETTERS.search(ln)), "")
    words = [w.strip(".'/-") for w in _WORD.findall(line.replace("`", " ").replace("*", " ").replace("#", " "))]
    kept = [w for w in words if w and w.lower() not in _COMMON][:TITLE_WORDS] or [w for w in words if w][:TITLE_WORDS]
    if not kept:
        return "Conversation"
    title = " ".join(kept)
    return title[0].upper() + title[1:]
