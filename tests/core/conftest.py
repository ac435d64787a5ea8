"""Builders shared by the core tests: messages, a recording summariser and a hand-driven clock."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compression.core.compressor import ContextCompressor
from compression.core.engine import reset_registry


def system(text: str = "You are Hermes, a coding assistant.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None = None, calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        msg["tool_calls"] = calls
    return msg


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def result(call_id: str, content: Any, name: str = "tool") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def tool_group(call_id: str, name: str, output: Any, text: str | None = None, **args: Any) -> list[dict[str, Any]]:
    return [assistant(text, [call(call_id, name, **args)]), result(call_id, output, name)]


def sized(msg: dict[str, Any], tokens: int) -> dict[str, Any]:
    """A message with a stored token count (what the web layer keeps on the row)."""
    return {**msg, "_tokens": tokens}


def conversation(turns: int, *, words: int = 50, with_tools: bool = True, sys_prompt: bool = True) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [system()] if sys_prompt else []
    for i in range(turns):
        msgs.append(user(f"turn {i}: " + "please " * words))
        if with_tools:
            msgs += tool_group(f"call_{i}", "read_file", f"contents of file {i}\n" * 40, path=f"src/f{i}.py")
        msgs.append(assistant(f"answer {i}: " + "done " * words))
    return msgs


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingSummariser:
    """Returns a fixed summary (or raises) and remembers every prompt and budget it was given."""

    def __init__(self, answer: str = "## Goal\nShip the feature.\n\n## Progress\n### Done\n- read src/f1.py", error: BaseException | None = None) -> None:
        self.answer = answer
        self.error = error
        self.calls: list[tuple[str, int]] = []

    def __call__(self, prompt: str, budget: int) -> str:
        self.calls.append((prompt, budget))
        if self.error is not None:
            raise self.error
        return self.answer

    @property
    def last_prompt(self) -> str:
        return self.calls[-1][0]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def summariser() -> RecordingSummariser:
    return RecordingSummariser()


@pytest.fixture
def make_compressor(clock, summariser):
    def make(context_length: int = 200_000, **kwargs: Any) -> ContextCompressor:
        kwargs.setdefault("summariser", summariser)
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("wall_clock", lambda: clock.now + 1_700_000_000)
        return ContextCompressor(context_length, **kwargs)

    return make


@pytest.fixture(autouse=True)
def _clean_registry():
    reset_registry()
    yield
    reset_registry()
