"""The Anthropic provider, on the official `anthropic` SDK (streaming, Messages API).

Also the `simulator` route: the same class pointed at the offline simulator's base_url. The SDK's
retry policy is left alone (2 retries; 429/5xx/529 retried, 413 and mid-stream errors not);
`max_retries` is exposed only so tests can shorten it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import anthropic
import httpx2

from llm.base import Final, Provider, StreamEvent, TextDelta, ToolCall
from llm.convert import from_anthropic_response, to_anthropic_request
from llm.errors import AuthenticationError, ProviderError, ProviderUnavailableError, classify
from llm.models import ModelCatalog
from llm.usage import normalize_anthropic_usage

# Named keyword arguments of `client.messages.stream`; anything else travels in `extra_body`.
_STREAM_KWARGS = frozenset(
    {
        "max_tokens", "messages", "model", "cache_control", "diagnostics", "inference_geo", "metadata",
        "output_config", "container", "service_tier", "speed", "stop_sequences", "system", "thinking",
        "tool_choice", "tools",
    }
)
FALLBACK_MAX_TOKENS = 8_192


def _retry_after(response: Any) -> float | None:
    headers = getattr(response, "headers", None) or {}
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after"):
            return float(headers["retry-after"])
    except ValueError:
        return None
    return None


def map_anthropic_error(exc: BaseException, provider: str = "anthropic") -> ProviderError:
    """An SDK (or transport) exception -> the matching `llm.errors` class."""
    if isinstance(exc, anthropic.APIStatusError):
        return classify(
            exc.status_code,
            exc.api_message or exc.message,
            provider=provider,
            request_id=exc.request_id,
            error_type=exc.type,
            retry_after=_retry_after(exc.response),
        )
    if isinstance(exc, (anthropic.APIConnectionError, httpx2.HTTPError)):
        return ProviderUnavailableError(str(exc) or type(exc).__name__, provider=provider)
    if isinstance(exc, anthropic.AnthropicError):
        # e.g. no API key could be resolved: the SDK raises before sending anything.
        message = str(exc)
        if "api_key" in message or "auth" in message.lower():
            return classify(401, message, provider=provider)
        return classify(None, message, provider=provider)
    raise TypeError(f"not a provider failure: {exc!r}")


class AnthropicProvider(Provider):
    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str = "",
        max_retries: int | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        name: str = "anthropic",
        catalog: ModelCatalog | None = None,
        client: anthropic.Anthropic | None = None,
    ):
        self.name = name
        self.default_model = model
        self.catalog = catalog or ModelCatalog()
        if client is None:
            kwargs: dict[str, Any] = {"api_key": api_key, "base_url": base_url}
            if max_retries is not None:
                kwargs["max_retries"] = max_retries
            if timeout is not None:
                kwargs["timeout"] = timeout
            if default_headers:
                kwargs["default_headers"] = dict(default_headers)
            client = anthropic.Anthropic(**kwargs)
            # The SDK only notices a missing key when sending (with a TypeError); say it clearly.
            self._missing_key = not (client.api_key or getattr(client, "auth_token", None))
        else:
            self._missing_key = False
        self.client = client

    def _max_tokens(self, model: str, requested: int | None) -> int:
        if requested is not None:
            return requested
        info = self.catalog.get(model)
        return info.max_output if info else FALLBACK_MAX_TOKENS

    def build_request(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        tools: Iterable[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The exact Messages body `stream` sends (useful for validation and debugging)."""
        model = self.resolve_model(model)
        return to_anthropic_request(
            messages, model=model, max_tokens=self._max_tokens(model, max_tokens), tools=tools, **extra
        )

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
        if self._missing_key:
            raise AuthenticationError(
                "no Anthropic API key configured (set ANTHROPIC_API_KEY or the provider's key)",
                provider=self.name,
            )
        body = self.build_request(messages, model=model, max_tokens=max_tokens, tools=tools, **extra)
        kwargs = {k: v for k, v in body.items() if k in _STREAM_KWARGS}
        extra_body = {k: v for k, v in body.items() if k not in _STREAM_KWARGS}
        if extra_body:
            kwargs["extra_body"] = extra_body
        if extra_headers:
            kwargs["extra_headers"] = dict(extra_headers)
        if timeout is not None:
            kwargs["timeout"] = timeout
        started = time.monotonic()
        try:
            with self.client.messages.stream(**kwargs) as stream:
                for event in stream:
                    if event.type == "text":
                        yield TextDelta(event.text)
                    elif event.type == "content_block_stop" and event.content_block.type == "tool_use":
                        block = from_anthropic_response({"content": [event.content_block.model_dump()]})
                        call = block["tool_calls"][0]
                        yield ToolCall(call["id"], call["function"]["name"], call["function"]["arguments"])
                final = stream.get_final_message()
                request_id = stream.request_id
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise map_anthropic_error(exc, self.name) from exc
        yield Final(
            message=from_anthropic_response(final),
            usage=normalize_anthropic_usage(final.usage),
            stop_reason=final.stop_reason or "",
            model=final.model,
            latency=time.monotonic() - started,
            request_id=request_id,
        )

    def count_tokens(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        model: str | None = None,
        tools: Iterable[Mapping[str, Any]] | None = None,
    ) -> int:
        """The provider's own prompt count (`/v1/messages/count_tokens`)."""
        body = self.build_request(messages, model=model, max_tokens=1, tools=tools)
        body.pop("max_tokens")
        try:
            return self.client.messages.count_tokens(**body).input_tokens
        except (anthropic.AnthropicError, httpx2.HTTPError) as exc:
            raise map_anthropic_error(exc, self.name) from exc
