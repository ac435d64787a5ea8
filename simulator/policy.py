"""The simulator's deterministic "model": what it answers, given a (valid) Messages request.

Decided from the last message only, in this order:
1. the last user message carries `tool_result` blocks -> a text report of what the tools returned
   (sizes, first line, errors); when the call answered a "call tool <name>" message (below), the
   report is `tool <name> returned: "<the first 200 characters of the result text>"` instead;
2. its text is a title request (starts "Write a title for this conversation", the first message
   in `<first-message>` tags) -> a short title made from that message (`simulator.title`); a
   compression prompt (contains the summary template's "## Goal" and "## Critical Context") -> a
   filled template (`simulator.summary`);
2b. the whole text (stripped) is "call tool <name> with <JSON object>" or "call tool <name>" ->
   one `tool_use` block calling that offered tool with those arguments (or a text saying that no
   tool of that name is offered, or that the arguments are not a JSON object);
3. the context engine's `context_search` tool is offered and the text says "search the history
   for …" -> a `context_search` call with the rest of that sentence as its query (its results are
   then reported quoting the best snippet); otherwise the project's workspace tools are offered and
   the text asks for one ("read notes.txt", "list files", "search for TODO", "write hello to
   out.txt", "run `ls`") -> `tool_use` blocks;
4. a question ("what was the budget?") -> the earlier sentence sharing the most words with it,
   so recall after compaction can be measured;
5. otherwise a deterministic text whose length grows with the question, or exactly N words when
   asked to "reply with N words".
Before 3: "repeat exactly: <text>" -> <text> verbatim (hostile markdown reaches the page as a
model would send it), and "answer in markdown" -> a fixed markdown reply (heading, list, table,
code fence).
Same request -> same answer, byte for byte (tool_use ids included).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simulator import summary as summary_mod
from simulator import title as title_mod
from simulator.blocks import strip_cache_control

PROJECT_TOOLS = ("read_file", "write_file", "list_files", "search_files", "terminal")
MAX_DEFAULT_WORDS = 400

_PATH = r"(?:`[^`]+`|\"[^\"]+\"|'[^']+'|[\w~][\w./-]*)"
_FILEISH = r"(?:`[^`]+`|[\w~][\w-]*(?:/[\w.-]+)*\.\w+|[\w~][\w.-]*/[\w./-]*)"
_ACTIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "write_file",
        re.compile(
            r"\bwrite\s+(?P<content>`[^`]*`|\"[^\"]*\"|'[^']*'|.+?)\s+(?:to|into)\s+(?:the\s+file\s+)?(?P<path>"
            + _PATH + ")",
            re.I,
        ),
    ),
    (
        "read_file",
        re.compile(
            r"\b(?:read|open|cat)\s+(?:the\s+)?(?:file\s+)?(?P<path>" + _FILEISH + r")"
            r"(?:\s+from\s+line\s+(?P<offset>\d+))?(?:.*?\b(?:first|limit)\s+(?P<limit>\d+)\s+lines?)?",
            re.I,
        ),
    ),
    (
        "list_files",
        re.compile(r"\blist\s+(?:the\s+|all\s+)?files(?:\s+in\s+(?P<path>" + _PATH + "))?", re.I),
    ),
    (
        "search_files",
        re.compile(
            r"\bsearch\s+(?:for\s+)?(?P<pattern>`[^`]+`|\"[^\"]+\"|'[^']+'|\S+)(?:\s+in\s+(?P<path>" + _PATH + "))?",
            re.I,
        ),
    ),
    ("terminal", re.compile(r"\brun\s+(?:the\s+command\s+)?`(?P<command>[^`]+)`", re.I)),
)
CONTEXT_SEARCH_TOOL = "context_search"
_HISTORY_SEARCH = re.compile(
    r"\bsearch\s+(?:the\s+|our\s+)?(?:conversation(?:'s)?\s+|chat\s+)?history\s+for\s+(?P<query>[^\n]+?)\s*(?:[.?!](?:\s|$)|\n|$)",
    re.I,
)
_WORDS_ASK = re.compile(r"\b(?:reply|answer|respond|write)\s+(?:with|in)\s+(?:about\s+)?(\d{1,6})\s+words\b", re.I)
_REPEAT = re.compile(r"^\s*repeat exactly:\s?(.+)\Z", re.I | re.S)
_MARKDOWN_ASK = re.compile(r"\b(?:answer|reply|respond)\s+in\s+markdown\b", re.I)
MARKDOWN_REPLY = """## Plan

Three steps, in order:

1. Read the **configuration** file.
2. Check the `threshold` value.
3. Write the *result* to `out.txt`.

| step | file | status |
|:-----|:-----|-------:|
| read | config.yaml | done |
| check | settings.py | pending |

```python
def threshold(window: int, ratio: float = 0.5) -> int:
    return int(window * ratio)  # tokens
```

See [the documentation](https://docs.example.com/compression) for details."""
# "call tool <name> with <JSON object>" (or "call tool <name>" alone): the whole stripped message.
_CALL_TOOL = re.compile(r"\Acall tool (?P<name>[A-Za-z0-9_.-]+)(?P<with> with(?:\s+(?P<args>.+))?)?\Z", re.S)
CALLED_RESULT_CHARS = 200
_QUESTION = re.compile(r"^\s*(?:what|which|who|when|where|how|do you remember|remind me)\b.*\?\s*$", re.I | re.S)
_ERROR_HINT = re.compile(r"(?i)\b(error|exception|traceback|no such file|not found|denied|failed|exit [1-9])")
_STOPWORDS = frozenset(
    "a an the is was were are be been of to in on for and or what which who when where how do did does "
    "you your me my i we our it its that this with at by from as about remember remind tell please".split()
)
_VOCABULARY = (
    "context window tokens summary cache prefix session message tool result file workspace model "
    "prompt budget threshold compression turn history detail answer plan step change note value "
    "record reply check review keep track earlier later current next goal progress state"
).split()


@dataclass(frozen=True)
class Reply:
    blocks: list[dict[str, Any]]
    stop_reason: str
    kind: str  # text | tool_use | tool_report | summary | recall | title
    extra: dict[str, Any] = field(default_factory=dict)


def _unquote(value: str | None) -> str:
    value = (value or "").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "`\"'":
        return value[1:-1]
    return value.rstrip(".,;:!?)")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content or ():
        if isinstance(block, Mapping):
            if block.get("type") == "text":
                parts.append(block.get("text") or "")
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
    return "\n".join(parts)


def _only_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text") or "" for b in content or () if isinstance(b, Mapping) and b.get("type") == "text")


def find_actions(text: str, offered: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """Tool calls the user's text asks for, in the order asked, restricted to offered tools."""
    found: list[tuple[int, str, dict[str, Any]]] = []
    taken: list[tuple[int, int]] = []
    for name, pattern in _ACTIONS:
        if name not in offered:
            continue
        for match in pattern.finditer(text):
            if any(s <= match.start() < e for s, e in taken):
                continue
            g = match.groupdict()
            args: dict[str, Any]
            if name == "write_file":
                args = {"path": _unquote(g["path"]), "content": _unquote(g["content"])}
            elif name == "read_file":
                args = {"path": _unquote(g["path"])}
                if g.get("offset"):
                    args["offset"] = int(g["offset"])
                if g.get("limit"):
                    args["limit"] = int(g["limit"])
            elif name == "list_files":
                args = {"path": _unquote(g.get("path")) or "."}
            elif name == "search_files":
                args = {"pattern": _unquote(g["pattern"]), "path": _unquote(g.get("path")) or "."}
            else:
                args = {"command": g["command"].strip()}
            taken.append((match.start(), match.end()))
            found.append((match.start(), name, args))
    found.sort(key=lambda item: item[0])
    unique: list[tuple[str, dict[str, Any]]] = []
    for _, name, args in found:
        if (name, args) not in unique:
            unique.append((name, args))
    return unique


def _tool_use_id(seed: str, n: int) -> str:
    return "toolu_sim" + hashlib.sha256(f"{seed}:{n}".encode()).hexdigest()[:20]


def _describe_result(name: str, args: Mapping[str, Any], text: str, is_error: bool) -> str:
    lines = text.splitlines()
    first = next((ln.strip() for ln in lines if ln.strip()), "")[:100]
    if is_error or (_ERROR_HINT.search(first) and name != "search_files"):
        target = args.get("path") or args.get("command") or args.get("pattern") or ""
        return f"{name} {target}: failed with error: {first or 'no output'}"
    if name == "read_file":
        return f"{args.get('path')}: {len(text):,} chars, {len(lines)} lines; first line: {first!r}"
    if name == "list_files":
        entries = [ln.strip() for ln in lines if ln.strip()]
        shown = ", ".join(entries[:5])
        return f"{args.get('path', '.')} holds {len(entries)} entries ({shown})"
    if name == "search_files":
        hits = [ln for ln in lines if ln.strip()]
        return f"search for {args.get('pattern')!r} in {args.get('path', '.')}: {len(hits)} matching lines; first: {first!r}"
    if name == "write_file":
        return f"wrote {args.get('path')}: {first or 'ok'}"
    if name == "terminal":
        return f"`{args.get('command')}` printed {len(lines)} lines; first: {first!r}"
    if name == CONTEXT_SEARCH_TOOL:
        return _describe_history_search(args, text)
    return f"{name}: {len(text):,} chars; first line: {first!r}"


def _describe_history_search(args: Mapping[str, Any], text: str) -> str:
    """A context_search result, quoting its best snippet (the result is the engine's JSON)."""
    try:
        answer = json.loads(text)
    except ValueError:
        answer = {}
    if not isinstance(answer, Mapping):
        answer = {}
    results = [r for r in answer.get("results") or () if isinstance(r, Mapping)]
    query = args.get("query", "")
    if answer.get("error"):
        return f"context_search for {query!r} failed: {answer['error']}"
    if not results:
        return f"context_search for {query!r}: nothing found in the history"
    best = results[0]
    snippet = " ".join(str(best.get("snippet") or "").split())
    return f"context_search for {query!r}: {len(results)} results; best ({best.get('ref', '?')}): \"{snippet}\""


def _tool_report(messages: list[Mapping[str, Any]]) -> str:
    last = messages[-1]
    calls: dict[Any, tuple[str, Mapping[str, Any]]] = {}  # by tool_use id, as the request gives it
    if len(messages) >= 2 and isinstance(messages[-2].get("content"), list):
        for block in messages[-2]["content"]:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                calls[block["id"]] = (block.get("name", ""), block.get("input") or {})
    lines = []
    for block in last["content"]:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            name, args = calls.get(block.get("tool_use_id"), ("tool", {}))
            text = _text_of(block.get("content"))
            lines.append("- " + _describe_result(name, args, text, bool(block.get("is_error"))))
    head = "Here is what I found:" if lines else "There were no tool results."
    return "\n".join([head, *lines])


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    return "JSON null"


def _reject_constant(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _json_object(raw: str | None) -> tuple[dict[str, Any] | None, str]:
    """The arguments of a "call tool" message, or None and a short reason they are not an object."""
    if raw is None:
        return None, "nothing follows `with`"
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:
        return None, str(exc)
    except RecursionError:
        return None, "nested too deeply"
    if not isinstance(value, dict):
        return None, f"it is {_json_kind(value)}"
    return value, ""


def _call_tool(call: re.Match[str], offered: set[Any], seed: str) -> Reply | str:
    """A "call tool" message: one `tool_use` block, or the text saying why nothing is called."""
    name = call.group("name")
    if name not in offered:
        return f"no tool named {name} is offered"
    args, reason = _json_object(call.group("args")) if call.group("with") else ({}, "")
    if args is None:
        return f"the arguments for {name} are not a JSON object: {reason}"
    return Reply([{"type": "tool_use", "id": _tool_use_id(seed, 0), "name": name, "input": args}],
                 "tool_use", "tool_use")


def _called_tool_report(messages: list[Mapping[str, Any]]) -> str | None:
    """The report of a call a "call tool" message asked for, when the last message carries its
    result (user "call tool …", assistant `tool_use`, user `tool_result`); else None."""
    if len(messages) < 3:
        return None
    asked, answered, last = messages[-3], messages[-2], messages[-1]
    if asked.get("role") != "user" or answered.get("role") != "assistant":
        return None
    call = _CALL_TOOL.match(_only_text(asked.get("content")).strip())
    if call is None or not isinstance(answered.get("content"), list):
        return None
    name = call.group("name")
    ids = {b.get("id") for b in answered["content"]
           if isinstance(b, Mapping) and b.get("type") == "tool_use" and b.get("name") == name}
    for block in last.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "tool_result" and block.get("tool_use_id") in ids:
            text = _only_text(block.get("content"))  # a string, or its text blocks joined
            return f'tool {name} returned: "{text[:CALLED_RESULT_CHARS]}"'
    return None


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def _recall(question: str, messages: list[Mapping[str, Any]], system: Any) -> str | None:
    """The earlier sentence that shares the most content words with the question."""
    keys = {w for w in _words(question) if w not in _STOPWORDS and len(w) > 2}
    if not keys:
        return None
    sources = [_text_of(system)] + [_text_of(m.get("content")) for m in messages[:-1]]
    best, best_score = None, 0
    for source in sources:
        for sentence in re.split(r"(?<=[.!?])\s+|\n+", source):
            sentence = sentence.strip().lstrip("-#* ").strip()
            if not sentence or sentence.endswith("?"):
                continue
            score = len(keys & set(_words(sentence)))
            if score > best_score:  # first best wins: ties keep the earliest mention
                best, best_score = sentence, score
    return f"From earlier in our conversation: {best[:400]}" if best else None


def _filler(seed: str, n_words: int, lead: str) -> str:
    rng = random.Random(hashlib.sha256(seed.encode("utf-8")).hexdigest())
    words = lead.split()
    while len(words) < n_words:
        sentence = [rng.choice(_VOCABULARY) for _ in range(rng.randint(6, 14))]
        sentence[0] = sentence[0].capitalize()
        sentence[-1] += "."
        words.extend(sentence)
    return " ".join(words[:n_words])


def _plain_text(user_text: str, n_messages: int) -> str:
    asked = _WORDS_ASK.search(user_text)
    if asked:
        n = max(1, int(asked.group(1)))
    else:
        n = min(MAX_DEFAULT_WORDS, 30 + len(user_text.split()) // 2)
    snippet = " ".join(user_text.split())[:80]
    lead = f'You said: "{snippet}".' if snippet else "Hello."
    return _filler(f"{n_messages}:{user_text}", n, lead)


def truncate_to(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> tuple[str, bool]:
    """Cut `text` (at word boundaries) until it fits `max_tokens`; True when something was cut."""
    if count_tokens(text) <= max_tokens:
        return text, False
    words = text.split(" ")
    lo, hi = 0, len(words)
    while lo < hi:  # the longest prefix of words that fits
        mid = (lo + hi + 1) // 2
        if count_tokens(" ".join(words[:mid])) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]), True


def respond(
    body: Mapping[str, Any],
    *,
    count_tokens: Callable[[str], int],
    empty_summary: bool = False,
) -> Reply:
    messages = list(body.get("messages") or ())
    max_tokens = int(body.get("max_tokens", 4096))
    if max_tokens == 0:
        return Reply([], "max_tokens", "text")
    # Cache markers do not change what the "model" says: the same turn gets the same answer (and
    # tool_use ids) under every caching strategy.
    seed = hashlib.sha256(json.dumps(strip_cache_control(messages), sort_keys=True, default=str).encode()).hexdigest()
    last = messages[-1]
    if last.get("role") == "assistant":  # prefill: continue the assistant's text
        return _text_reply("Continuing.", max_tokens, count_tokens, "text")
    content = last.get("content")
    has_results = isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )
    if has_results:
        report = _called_tool_report(messages)
        if report is None:
            report = _tool_report(messages)
        return _text_reply(report, max_tokens, count_tokens, "tool_report")
    user_text = _only_text(content)
    if title_mod.is_title_prompt(user_text):
        return _text_reply(title_mod.title_for(user_text), max_tokens, count_tokens, "title")
    if summary_mod.is_compression_prompt(user_text):
        text = "" if empty_summary else summary_mod.build_summary(user_text)
        return _text_reply(text, max_tokens, count_tokens, "summary")
    offered: set[Any] = {t.get("name") for t in body.get("tools") or () if isinstance(t, Mapping)}
    call = _CALL_TOOL.match(user_text.strip())
    if call:
        called = _call_tool(call, offered, seed)
        if isinstance(called, Reply):
            return called
        return _text_reply(called, max_tokens, count_tokens, "text")
    verbatim = _REPEAT.match(user_text)
    if verbatim:
        return _text_reply(verbatim.group(1), max_tokens, count_tokens, "text")
    if _MARKDOWN_ASK.search(user_text):
        return _text_reply(MARKDOWN_REPLY, max_tokens, count_tokens, "text")
    history = _HISTORY_SEARCH.search(user_text) if CONTEXT_SEARCH_TOOL in offered else None
    if history:
        query = _unquote(history.group("query"))
        return Reply([
            {"type": "text", "text": f"I'll search the history for {query}."},
            {"type": "tool_use", "id": _tool_use_id(seed, 0), "name": CONTEXT_SEARCH_TOOL,
             "input": {"query": query, "limit": 5}},
        ], "tool_use", "tool_use")
    actions = find_actions(user_text, offered & set(PROJECT_TOOLS))
    if actions:
        blocks: list[dict[str, Any]] = []
        targets = ", ".join(
            f"{name} {next(iter(args.values()), '')}".strip() for name, args in actions
        )
        blocks.append({"type": "text", "text": f"I'll use {targets}."})
        for n, (name, args) in enumerate(actions):
            blocks.append({"type": "tool_use", "id": _tool_use_id(seed, n), "name": name, "input": args})
        return Reply(blocks, "tool_use", "tool_use")
    if _QUESTION.match(user_text):
        recalled = _recall(user_text, messages, body.get("system"))
        if recalled:
            return _text_reply(recalled, max_tokens, count_tokens, "recall")
    return _text_reply(_plain_text(user_text, len(messages)), max_tokens, count_tokens, "text")


def _text_reply(text: str, max_tokens: int, count_tokens: Callable[[str], int], kind: str) -> Reply:
    text, cut = truncate_to(text, max_tokens, count_tokens)
    return Reply([{"type": "text", "text": text}], "max_tokens" if cut else "end_turn", kind)
