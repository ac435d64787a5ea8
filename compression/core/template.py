"""The summary template of SPEC §6, defined once.

``SUMMARY_TEMPLATE`` is what the summariser is asked to fill; ``TEMPLATE_HEADINGS`` are its
headings in order. Everything that writes or reads a summary (the prompt, the local fallback, the
simulator's summariser, the tests) takes the headings from here. No imports: cheap to load anywhere.
"""

from __future__ import annotations

SUMMARY_TEMPLATE = """## Goal
[What the user is trying to accomplish]

## Constraints & Preferences
[User preferences, coding style, constraints, important decisions]

## Progress
### Done
[Completed work — specific file paths, commands run, results]
### In Progress
[Work currently underway]
### Blocked
[Any blockers or issues encountered, with exact error messages]

## Key Decisions
[Important technical decisions and why]

## Relevant Files
[Files read, modified, or created — with a brief note on each]

## Next Steps
[What needs to happen next]

## Critical Context
[Specific values, error messages, configuration details — never secrets]"""

TEMPLATE_HEADINGS: tuple[str, ...] = tuple(line for line in SUMMARY_TEMPLATE.splitlines() if line.startswith("#"))
