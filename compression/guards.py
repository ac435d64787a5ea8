"""Checks that the apps above contribute to the settings, so `compression` asks without importing
them: whether the terminal's sandbox can start is known to the tools (`sessions.agent.tools`),
which register their probe when the app is ready.

Without a registered probe the terminal counts as impossible to sandbox: it is never enabled on a
guess.
"""
from __future__ import annotations

from collections.abc import Callable

_terminal_probe: Callable[..., str | None] | None = None


def register_terminal_sandbox_probe(probe: Callable[..., str | None]) -> None:
    """`probe(network=bool)` returns why no sandbox can start, or None when one can."""
    global _terminal_probe
    _terminal_probe = probe


def terminal_sandbox_problem(*, network: bool) -> str | None:
    if _terminal_probe is None:
        return "no sandbox is available to this process"
    return _terminal_probe(network=network)
