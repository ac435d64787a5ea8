"""Reading the real prompt size out of whatever usage shape a provider returned (SPEC §3.3).

Guarantees: ``prompt_tokens_of`` accepts a dict or an object and returns
``input + cache_read + cache_write`` (Anthropic semantics: input excludes cached tokens), or
None when the usage carries no prompt information. Shapes understood, in order:
- normalised (``input``, ``cache_read``, ``cache_write``: the llm package's ``Usage``);
- Anthropic (``input_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``);
- OpenAI-style (``prompt_tokens``, which already includes cached tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _get(usage: Any, key: str) -> Any:
    if isinstance(usage, Mapping):
        return usage.get(key)
    return getattr(usage, key, None)


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return None


def prompt_tokens_of(usage: Any) -> int | None:
    if usage is None:
        return None
    normalised = _int(_get(usage, "input"))
    if normalised is not None:
        return normalised + (_int(_get(usage, "cache_read")) or 0) + (_int(_get(usage, "cache_write")) or 0)
    anthropic = _int(_get(usage, "input_tokens"))
    if anthropic is not None:
        return (
            anthropic
            + (_int(_get(usage, "cache_read_input_tokens")) or 0)
            + (_int(_get(usage, "cache_creation_input_tokens")) or 0)
        )
    return _int(_get(usage, "prompt_tokens"))
