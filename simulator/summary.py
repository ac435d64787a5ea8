"""The simulator's summariser: fills the SPEC §6 template from the turns in a compression prompt.

Reads the prompt the engine builds (compression/core/summary.py): an optional
"PREVIOUS SUMMARY:" section, the turns after "TURNS TO SUMMARIZE:" or "NEW TURNS TO
INCORPORATE:" serialised as `[USER]: …`, `[ASSISTANT]: …` + `[Tool calls: name(args)]`,
`[TOOL RESULT id]: …`, then the template. Without those section markers it falls back to the
span from the first turn marker to the template.

Deterministic and concrete, like a good summariser: goal = the first user request; Done = each
tool called with its target; files, errors and sentences with numbers are kept; every item of a
previous summary is carried forward (its In Progress items move to Done).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from compression.core.template import TEMPLATE_HEADINGS as HEADINGS

MAX_ITEMS = 40
ITEM_CHARS = 240

_TURN = re.compile(r"^\[(USER|ASSISTANT|SYSTEM|TOOL RESULT[^\]]*)\]:[ \t]?", re.M)
_SECTION_START = re.compile(r"(?:NEW TURNS TO INCORPORATE|TURNS TO SUMMARIZE):[ \t]*\n")
_SECTION_END = re.compile(r"\n\n(?:ADDITIONAL CONTEXT|Use exactly this structure)|\n## Goal\b")
_PREVIOUS = re.compile(r"PREVIOUS SUMMARY:[ \t]*\n(.*?)(?=\n\n(?:NEW TURNS TO INCORPORATE|TURNS TO SUMMARIZE):)", re.S)
_CALL = re.compile(r"^\s*([\w.-]+)\((.*)\)\s*$", re.M)
_FILE = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.(?:py|txt|md|json|ya?ml|js|ts|tsx|jsx|toml|cfg|ini|csv|html|css|sh|go|rs|"
    r"java|c|h|cpp|rb|php|sql|log|lock|env|xml))\b"
)
_ERROR = re.compile(r"(?i)(error|exception|traceback|no such file|not found|permission denied|failed|exit [1-9])")
_CONSTRAINT = re.compile(r"(?i)\b(must|should|don't|do not|never|always|prefer|without|only use|make sure)\b")
_DECISION = re.compile(r"(?i)\b(decided|decide to|we will|i will use|going with|chose|instead of)\b")
_NUMBER = re.compile(r"\d")


def is_compression_prompt(text: str) -> bool:
    return "## Goal" in text and "## Critical Context" in text


@dataclass
class Turn:
    role: str  # USER | ASSISTANT | SYSTEM | TOOL
    text: str
    calls: list[tuple[str, dict]] = field(default_factory=list)


def _clip(text: str, n: int = ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _parse_args(raw: str) -> dict:
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {"value": value}
    except ValueError:
        found = dict(re.findall(r'"(\w+)"\s*:\s*"([^"]*)"', raw))
        return found


def parse_turns(section: str) -> list[Turn]:
    turns: list[Turn] = []
    matches = list(_TURN.finditer(section))
    for n, match in enumerate(matches):
        end = matches[n + 1].start() if n + 1 < len(matches) else len(section)
        body = section[match.end() : end].strip()
        role = "TOOL" if match.group(1).startswith("TOOL") else match.group(1)
        calls: list[tuple[str, dict]] = []
        if role == "ASSISTANT" and "[Tool calls:" in body:
            body, _, tail = body.partition("[Tool calls:")
            for call in _CALL.finditer(tail):
                calls.append((call.group(1), _parse_args(call.group(2))))
            body = body.strip()
        turns.append(Turn(role, body, calls))
    return turns


def split_prompt(prompt: str) -> tuple[str, str]:
    """(previous summary or "", the serialised turns)."""
    previous = _PREVIOUS.search(prompt)
    start = _SECTION_START.search(prompt)
    if start:
        rest = prompt[start.end() :]
    else:
        first = _TURN.search(prompt)
        rest = prompt[first.start() :] if first else ""
    end = _SECTION_END.search(rest)
    turns = rest[: end.start()] if end else rest
    return (previous.group(1).strip() if previous else ""), turns


def parse_summary(text: str) -> dict[str, list[str]]:
    """A summary body -> {heading: [items]}; template placeholders like "[What …]" are skipped."""
    sections: dict[str, list[str]] = {h: [] for h in HEADINGS}
    current = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in sections:
            current = stripped
            continue
        if current is None or not stripped or (stripped.startswith("[") and stripped.endswith("]")):
            continue
        if stripped.lower() in ("none", "- none", "none."):
            continue
        sections[current].append(stripped[2:].strip() if stripped.startswith(("- ", "* ")) else stripped)
    return sections


def _target(name: str, args: dict) -> str:
    if name == "terminal":
        return f"ran `{args.get('command', '')}`"
    if name == "search_files":
        return f"searched for '{args.get('pattern', '')}' in {args.get('path', '.')}"
    if name == "write_file":
        return f"wrote {args.get('path', '')}"
    if name == "read_file":
        return f"read {args.get('path', '')}"
    if name == "list_files":
        return f"listed {args.get('path', '.')}"
    first = next(iter(args.items()), None)
    return f"{name} {first[0]}={first[1]}" if first else name


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _add(items: list[str], item: str) -> None:
    item = _clip(item)
    if item and item not in items and len(items) < MAX_ITEMS:
        items.append(item)


_FOCUS = re.compile(r'FOCUS TOPIC: "([^"]+)"')


def build_summary(prompt: str) -> str:
    previous_text, turns_text = split_prompt(prompt)
    prev = parse_summary(previous_text) if previous_text else {h: [] for h in HEADINGS}
    turns = parse_turns(turns_text)
    out: dict[str, list[str]] = {h: [] for h in HEADINGS}

    users = [t for t in turns if t.role == "USER" and t.text]
    goal = prev["## Goal"][:1] or ([_clip(users[0].text, 400)] if users else [])
    out["## Goal"] = goal

    for item in prev["## Constraints & Preferences"]:
        _add(out["## Constraints & Preferences"], item)
    for item in prev["### Done"] + prev["### In Progress"]:
        _add(out["### Done"], item)
    for item in prev["### Blocked"]:
        _add(out["### Blocked"], item)
    for key in ("## Key Decisions", "## Relevant Files", "## Critical Context"):
        for item in prev[key]:
            _add(out[key], item)

    for turn in turns:
        for name, args in turn.calls:
            _add(out["### Done"], _target(name, args))
            for key in ("path", "file", "filename"):
                if isinstance(args.get(key), str) and args[key] not in (".", ""):
                    _add(out["## Relevant Files"], args[key])
        for path in _FILE.findall(turn.text):
            _add(out["## Relevant Files"], path)
        for sentence in _sentences(turn.text):
            if turn.role == "TOOL" or turn.role == "ASSISTANT":
                if _ERROR.search(sentence):
                    _add(out["### Blocked"], sentence)
            if turn.role == "USER":
                if _CONSTRAINT.search(sentence):
                    _add(out["## Constraints & Preferences"], sentence)
                if _NUMBER.search(sentence):
                    _add(out["## Critical Context"], sentence)
            if turn.role == "ASSISTANT" and _DECISION.search(sentence):
                _add(out["## Key Decisions"], sentence)

    focus = _FOCUS.search(prompt)
    if focus:
        # A focused compaction keeps everything that mentions the topic in full detail.
        topic = focus.group(1)
        words = [w for w in re.findall(r"\w+", topic.lower()) if len(w) > 3] or [topic.lower()]
        _add(out["## Critical Context"], f"Focus topic: {topic}")
        for turn in turns:
            for sentence in _sentences(turn.text):
                if any(w in sentence.lower() for w in words):
                    _add(out["## Critical Context"], f"[{turn.role.lower()}] {sentence}")

    if users:
        last_ask = _clip(users[-1].text)
        _add(out["### In Progress"], last_ask)
        _add(out["## Next Steps"], f"Continue with the latest request: {last_ask}")
        for user in users[:-1]:
            _add(out["### Done"], f"Handled request: {_clip(user.text, 160)}")

    lines: list[str] = []
    for heading in HEADINGS:
        if heading.startswith("## ") and lines:
            lines.append("")
        lines.append(heading)
        if heading == "## Progress":
            continue
        items = out[heading]
        if heading == "## Goal":
            lines.extend(items or ["(not stated)"])
        elif items:
            lines.extend(f"- {item}" for item in items)
        else:
            lines.append("- None")
    return "\n".join(lines) + "\n"
