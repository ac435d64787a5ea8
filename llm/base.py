"""The provider interface: one IO seam (`stream`) and typed stream events.

A provider takes internal OpenAI-style messages (ARCHITECTURE.md) and yields, in order:
any number of `TextDelta`, then one `ToolCall` per tool call the model made (each complete, with
JSON-string arguments), then exactly one `Final`. Failures raise `llm.errors.ProviderError`
subclasses — never an SDK exception. `complete()` drains the stream for callers that want only
the answer (the auxiliary summariser: prompt in, text out).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from llm.usage import Usage

Message = dict[str, Any]


@dataclass(frozen=True)
class TextDelta:
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as in the internal message format
    type: Literal["tool_call"] = "tool_call"

    def as_message_part(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Final:
    message: Message  # the internal assistant message (content + tool_calls)
    usage: Usage
    stop_reason: str  # end_turn | tool_use | max_tokens | stop_sequence | … (OpenAI reasons mapped)
    model: str
    latency: float  # seconds from request to the end of the stream
    request_id: str | None = None
    type: Literal["final"] = "final"

    @property
    def text(self) -> str:
        content = self.message.get("content")
        return content if isinstance(content, str) else ""

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return list(self.message.get("tool_calls") or [])


StreamEvent = TextDelta | ToolCall | Final


class Provider(abc.ABC):
    """A model route. Subclasses implement `stream`; everything else derives from it."""

    name: str = ""
    default_model: str = ""

    @abc.abstractmethod
    def stream(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        tools: Iterable[Mapping[str, Any]] | None = None,
        extra_headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **extra: Any,
    ) -> Iterator[StreamEvent]:
        """Stream one completion. `max_tokens=None` uses the model's output cap from the catalog."""

    def resolve_model(self, model: str | None) -> str:
        """The model to call: the given one, else the provider's default."""
        model = model or self.default_model
        if not model:
            raise ValueError("no model given and the provider has no default model")
        return model

    def complete(
        self,
        messages: str | Iterable[Mapping[str, Any]],
        **kwargs: Any,
    ) -> Final:
        """Run `stream` to the end and return its `Final` (a str is sent as one user message)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        final: Final | None = None
        for event in self.stream(messages, **kwargs):
            if isinstance(event, Final):
                final = event
        if final is None:  # a provider bug, not a model failure
            raise RuntimeError(f"{type(self).__name__}.stream ended without a Final event")
        return final
