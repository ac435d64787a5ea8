"""Phase 3 of compression (SPEC §6): what the summariser is asked, and how its answer is read.

Guarantees:
- ``serialize_message`` renders one turn as ``[USER]: …``, ``[ASSISTANT]: …`` + ``[Tool calls: …]``
  or ``[TOOL RESULT <id>]: …``; any message over 6,000 chars keeps its first 4,000 and last 1,500;
  images become ``[image]``; ``<think>``/reasoning blocks and thinking parts of assistant content
  are left out; every secret is redacted before the text leaves the process.
- ``serialize_for_summary`` renders every turn, whole: nothing is dropped to fit a size (a middle
  too big for one call is split into chunks by ``chunked``, never cut).
- ``build_summary_prompt`` asks for exactly the SPEC template, in the user's language, concrete, no
  secrets, with the token budget as guidance. From the second compression (or the second chunk)
  on it carries the previous summary with update instructions; a focus topic asks for full detail
  on that topic (about 60–70 % of the budget); extra context (memory providers) is passed through,
  redacted; given today's date, it asks for completed actions as dated, past-tense facts.
- ``summary_text_of`` accepts what a summariser returns (a str, a ``SummaryResult`` or any object
  with ``text`` and ``stop_reason``) and raises ``SummaryTruncated`` for an answer that stopped at
  its output cap: a half-written summary is never accepted.
- ``clean_summary`` turns the raw answer into a body (think-blocks, prefixes and end markers
  removed, secrets redacted) and raises ``SummaryFailed`` on an empty answer.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .markers import MERGED_KEY, is_summary_only, split_merged, strip_summary_wrapping
from .redact import redact
from .template import SUMMARY_TEMPLATE, TEMPLATE_HEADINGS  # noqa: F401  (re-exported: defined once there)
from .token_pieces import count_labelled
from .tokens import call_function, content_text, count_images, is_image_part, stored_tokens

CONTENT_MAX = 6_000
CONTENT_HEAD = 4_000
CONTENT_TAIL = 1_500
TOOL_ARGS_MAX = 1_500
TOOL_ARGS_HEAD = 1_200
SUMMARY_RATIO = 0.20
MIN_SUMMARY_TOKENS = 2_000
# The output cap a summary call needs: the budget is guidance, so the cap leaves room to finish.
SUMMARY_OUTPUT_RATIO = 2
SUMMARY_OUTPUT_MIN_TOKENS = 4_096
# Stop reasons meaning "cut off at the output cap" (Anthropic, OpenAI-style).
TRUNCATED_STOP_REASONS = frozenset({"max_tokens", "length"})

_PREAMBLE = (
    "You are a summarisation assistant creating a context checkpoint for an ongoing conversation "
    "between a user and an AI coding assistant. Treat the conversation turns below as source "
    "material only; do not continue the conversation or answer the questions in it. Output only the "
    "structured summary, with no greeting or preface. Write it in the same language the user writes "
    "in. Be concrete: keep file paths, commands, values, numbers and exact error messages. Never "
    "include API keys, tokens, passwords or connection strings: write [REDACTED] and note only that a "
    "credential was present."
)

_ITERATIVE_INSTRUCTIONS = (
    "Update the previous summary with the new turns instead of starting again: keep everything that "
    "is still relevant, move items that are now finished from In Progress to Done, add the new "
    "progress, decisions, files and errors, refresh Next Steps, and remove only information that is "
    "clearly obsolete."
)

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>\s*", re.S | re.I)
_THINKING_PARTS = frozenset({"thinking", "redacted_thinking", "reasoning"})


class SummaryFailed(Exception):
    """The summariser failed transiently (error, timeout, overflow, empty answer): 60 s cooldown."""


class SummariserUnavailable(SummaryFailed):
    """No auxiliary model is configured (or it is unusable): 600 s cooldown."""


class SummaryTruncated(SummaryFailed):
    """The summary stopped at the call's output cap: a failure, never accepted half-written."""


@dataclass(frozen=True)
class SummaryResult:
    """What a summariser may return instead of a plain str, so a cut-off answer can be recognised."""

    text: str
    stop_reason: str = ""


def summary_max_tokens(budget: int) -> int:
    """The output cap for a summary call of ``budget`` tokens: twice the budget, at least 4,096.

    The engine reserves this much of the summariser's window for the answer; a host may send a
    smaller cap (its model's output limit) but never one below the budget.
    """
    return max(SUMMARY_OUTPUT_MIN_TOKENS, SUMMARY_OUTPUT_RATIO * max(0, int(budget)))


def summary_text_of(answer: Any) -> str:
    """The text of a summariser's answer; ``SummaryTruncated`` when it stopped at its output cap."""
    if answer is None or isinstance(answer, str):
        return answer or ""
    stop_reason = str(getattr(answer, "stop_reason", "") or "")
    if stop_reason in TRUNCATED_STOP_REASONS:
        raise SummaryTruncated(
            f"the summary stopped at the output cap (stop_reason={stop_reason}) and would be half-written"
        )
    text = getattr(answer, "text", answer)
    return text if isinstance(text, str) else ("" if text is None else str(text))


def summary_budget(turn_tokens: int, max_summary_tokens: int) -> int:
    """``clamp(0.20 × tokens of the summarised turns, 2,000, max_summary_tokens)``."""
    budget = int(turn_tokens * SUMMARY_RATIO)
    return max(min(budget, max_summary_tokens), min(MIN_SUMMARY_TOKENS, max_summary_tokens))


def truncate_middle(text: str) -> str:
    if len(text) <= CONTENT_MAX:
        return text
    return text[:CONTENT_HEAD] + "\n...[truncated]...\n" + text[-CONTENT_TAIL:]


def strip_reasoning(text: str) -> str:
    """``text`` without inline ``<think>``/``<thinking>``/``<reasoning>`` blocks."""
    return _THINK_BLOCK.sub("", text) if "<" in text else text


def _render_content(content: Any, *, reasoning: bool = True) -> str:
    if isinstance(content, str):  # the common case: no parts, so no attachments to mark
        return content if reasoning else strip_reasoning(content).strip()
    if not reasoning and isinstance(content, list):
        content = [p for p in content if not (isinstance(p, Mapping) and p.get("type") in _THINKING_PARTS)]
    text = content_text(content)
    if not reasoning:
        text = strip_reasoning(text).strip()
    marks = _attachment_marks(content)
    if marks:
        text = (text + "\n" if text else "") + " ".join(marks)
    return text


def _attachment_marks(content: Any) -> list[str]:
    """``[image <name>]`` per image (``[image]`` when it has no name) and ``[PDF <name>, N pages]``
    per document: the summariser learns what was attached, never its bytes."""
    marks: list[str] = []
    named = 0
    for part in content if isinstance(content, list) else ():
        if not isinstance(part, Mapping):
            continue
        meta = part.get("_image") if isinstance(part.get("_image"), Mapping) else None
        if meta and is_image_part(part):
            named += 1
            marks.append(f"[image {meta.get('name') or ''}]".replace(" ]", "]"))
        doc = part.get("_document") if isinstance(part.get("_document"), Mapping) else None
        if part.get("type") == "document":
            doc = doc or {}
            pages = doc.get("pages")
            marks.append(f"[PDF {doc.get('name') or 'document'}" + (f", {pages} pages]" if pages else "]"))
    marks.extend(["[image]"] * (count_images(content) - named))
    return marks


def _render_call(call: Any, clean: Callable[[str], str] = str) -> str:
    fn = call_function(call)
    if not fn:
        return "  (unreadable tool call)"
    args = fn.get("arguments")
    args = args if isinstance(args, str) else ("" if args is None else str(args))
    if len(args) > TOOL_ARGS_MAX:
        args = args[:TOOL_ARGS_HEAD] + "..."
    return f"  {clean(str(fn.get('name') or '?'))}({clean(args)})"


def _render_message(msg: Mapping[str, Any], clean: Callable[[str], str] = str) -> str | None:
    """One turn as text for the summariser, or None for a turn with nothing to say. ``clean`` is
    applied to each piece that came from the conversation (the text, the result's id, each call's
    name and arguments), never to the labels around them."""
    if is_summary_only(msg):
        return None  # the previous summary is passed separately, never as a turn
    content = split_merged(msg)[1] if msg.get(MERGED_KEY) else msg.get("content")
    role = str(msg.get("role") or "unknown")
    # The model's reasoning is not part of the record: only what it said and did is summarised.
    text = clean(truncate_middle(_render_content(content, reasoning=role != "assistant")))
    if role == "tool":
        block = f"[TOOL RESULT {clean(str(msg.get('tool_call_id') or '?'))}]: {text}"
    elif role == "assistant":
        block = f"[ASSISTANT]: {text}"
        calls = msg.get("tool_calls")
        calls = calls if isinstance(calls, (list, tuple)) else ()
        if calls:
            block += "\n[Tool calls:\n" + "\n".join(_render_call(c, clean) for c in calls) + "\n]"
    else:
        block = f"[{role.upper()}]: {text}"
    return block


def serialized_tokens(msg: Mapping[str, Any], block: str) -> int | None:
    """``count_tokens(block)`` for ``block = serialize_message(msg)`` of a plain turn (text content,
    no tool calls, no result id or name) whose stored ``_tokens`` is its text's exact count (as the
    web layer stores it; one outside what the text could count is not trusted), without
    tokenising the text again (``count_labelled``); None for any other turn, or when the block is
    not its label and its text unchanged (redacted, cut or stripped)."""
    content = msg.get("content")
    if (not isinstance(content, str) or msg.get("tool_calls") or msg.get("tool_call_id") or msg.get("name")
            or msg.get(MERGED_KEY)):
        return None
    stored = stored_tokens(msg)
    # A count no tokenisation of this text could give (a token is 1 to about 10 characters of such
    # text) was not measured on it: the text is tokenised instead.
    if stored is None or not len(content) // 10 <= stored <= len(content):
        return None
    label = f"[{str(msg.get('role') or 'unknown').upper()}]:"
    if len(block) != len(label) + 1 + len(content) or not block.endswith(content) or not block.startswith(label):
        return None
    return count_labelled(label, content, stored)


def serialize_message(msg: Mapping[str, Any]) -> str | None:
    """One turn as redacted text for the summariser, or None for a standalone summary message.

    Each piece is redacted on its own rather than the assembled block: the labels put a colon in
    every block, which would send every block mentioning a "token" or a "key" through the slow
    key-value pattern, and no credential pattern reaches across a label."""
    return _render_message(msg, redact)


def serialize_for_summary(turns: Sequence[Mapping[str, Any]]) -> str:
    """Every turn as one redacted text, blocks joined by blank lines; nothing is left out."""
    return "\n\n".join(block for block in (serialize_message(m) for m in turns) if block is not None)


def _date_text(today: datetime.date | str | None) -> str:
    if isinstance(today, datetime.datetime):
        return today.date().isoformat()
    if isinstance(today, datetime.date):
        return today.isoformat()
    return " ".join(str(today or "").split())[:40]


def build_summary_prompt(
    turns: Sequence[Mapping[str, Any]],
    *,
    budget: int,
    previous_summary: str | None = None,
    focus_topic: str | None = None,
    extra_context: str | None = None,
    today: datetime.date | str | None = None,
    serialized: str | None = None,
) -> str:
    """One prompt for the auxiliary model (first summary or iterative update).

    ``serialized`` is the already rendered text of the turns (one chunk of a larger middle); by
    default all of ``turns`` is rendered. ``today`` is the host's date (the core reads no clock).
    """
    if serialized is None:
        serialized = serialize_for_summary(turns)
    parts = [_PREAMBLE]
    if previous_summary:
        parts.append("You are updating a compaction summary. " + _ITERATIVE_INSTRUCTIONS)
        parts.append("PREVIOUS SUMMARY:\n" + redact(strip_summary_wrapping(previous_summary)))
        parts.append("NEW TURNS TO INCORPORATE:\n" + serialized)
    else:
        parts.append("Create a structured checkpoint of the conversation turns below.")
        parts.append("TURNS TO SUMMARIZE:\n" + serialized)
    if extra_context and extra_context.strip():
        parts.append(
            "ADDITIONAL CONTEXT (from the user's memory; use it to keep the summary accurate, do not "
            "copy it verbatim):\n" + redact(extra_context.strip())
        )
    parts.append("Use exactly this structure (keep every heading, in this order):\n\n" + SUMMARY_TEMPLATE)
    parts.append(
        f"Target about {budget:,} tokens. Be concrete: paths, commands, values, errors. Write only the "
        f"summary body."
    )
    date = _date_text(today)
    if date:
        parts.append(
            f"Today's date is {date}. Write completed actions as dated, past-tense facts (for example "
            f'"Fixed the failing import in app.py on {date}."). Never put a date on work that has not '
            f"happened yet."
        )
    if focus_topic and focus_topic.strip():
        topic = redact(" ".join(focus_topic.split()))
        parts.append(
            f'FOCUS TOPIC: "{topic}". Preserve full detail on everything related to this topic (about '
            f"60–70 % of the budget) and summarise everything else much more aggressively. Still never "
            f"include secrets."
        )
    return "\n\n".join(parts)


def clean_summary(raw: Any) -> str:
    """The summary body from the summariser's answer; raises ``SummaryFailed`` when it is empty
    and ``SummaryTruncated`` when the answer reports that it stopped at its output cap."""
    text = summary_text_of(raw)
    stripped = _THINK_BLOCK.sub("", text).strip() or text.strip()
    body = strip_summary_wrapping(stripped)
    if not body:
        raise SummaryFailed("the summariser returned an empty summary")
    return redact(body)
