"""The OpenAI-compatible provider (OpenRouter, Nous Portal, any custom base_url), on the official
`openai` SDK, for the main or the auxiliary model.

Internal messages already use the OpenAI chat format, so conversion is only: drop `_` metadata
keys (an image's `_image` included: images go as `image_url` parts), turn a `document` part (a PDF,
which this wire has no block for) into a text part with the text the upload side extracted
(`llm.convert.document_as_text`), and normalise tool schemas to `{type: function, function: {...}}`
(a `cache_control` on a schema is kept for OpenRouter). Cache markers placed by the caching module in the envelope layout
(on content parts) pass through untouched. Usage is normalised with OpenRouter's cache fields.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import httpx
import openai

from llm.base import Final, Provider, StreamEvent, TextDelta, ToolCall
from llm.convert import document_as_text
from llm.errors import ProviderError, ProviderUnavailableError, classify
from llm.usage import normalize_openai_usage

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
                "content_filter": "refusal"}


def _strip_meta(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_meta(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("_"))}
    if isinstance(value, list):
        return [_strip_meta(v) for v in value]
    return value


def _documents_as_text(content: Any) -> Any:
    """A message's content with each `document` part (those inside tool results too) as text."""
    if not isinstance(content, list):
        return content
    out = []
    for part in content:
        if isinstance(part, Mapping) and part.get("type") == "document":
            part = document_as_text(part)
        elif isinstance(part, Mapping) and isinstance(part.get("content"), list):
            part = {**part, "content": _documents_as_text(part["content"])}
        out.append(part)
    return out


def to_openai_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [_strip_meta({**m, "content": _documents_as_text(m["content"])} if isinstance(m.get("content"), list) else m)
            for m in messages]


def to_openai_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = _strip_meta(tool)
    if isinstance(spec.get("function"), Mapping):
        return copy.deepcopy(spec)
    out: dict[str, Any] = {
        "type": "function",
        "function": {
            "name": spec.get("name") or "",
            "description": spec.get("description") or "",
            "parameters": copy.deepcopy(spec.get("parameters", spec.get("input_schema")) or {"type": "object", "properties": {}}),
        },
    }
    if spec.get("cache_control"):
        out["cache_control"] = copy.deepcopy(spec["cache_control"])
    return out


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


def _error_message(exc: openai.APIStatusError) -> tuple[str, str | None]:
    body = exc.body
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping):
            message = str(err.get("message") or exc.message)
            # OpenRouter wraps the upstream error text in metadata.raw.
            raw = (err.get("metadata") or {}).get("raw") if isinstance(err.get("metadata"), Mapping) else None
            if raw:
                message = f"{message}: {raw}"
            return message, err.get("type") if isinstance(err.get("type"), str) else None
    return exc.message, None


def map_openai_error(exc: BaseException, provider: str) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        message, error_type = _error_message(exc)
        return classify(
            exc.status_code, message, provider=provider, request_id=exc.request_id, error_type=error_type,
            retry_after=_retry_after(exc.response),
        )
    if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIConnectionError):
        # An error object inside the stream (HTTP 200): its message decides the class.
        body = exc.body if isinstance(exc.body, Mapping) else {}
        code = body.get("code")
        return classify(
            code if isinstance(code, int) else 200, exc.message, provider=provider,
            error_type=body.get("type") if isinstance(body.get("type"), str) else None,
        )
    if isinstance(exc, (openai.APIConnectionError, httpx.HTTPError)):
        return ProviderUnavailableError(str(exc) or type(exc).__name__, provider=provider)
    if isinstance(exc, openai.OpenAIError):
        return classify(401 if "api_key" in str(exc) else None, str(exc), provider=provider)
    raise TypeError(f"not a provider failure: {exc!r}")


class OpenAICompatibleProvider(Provider):
    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None = None,
        model: str = "",
        name: str = "custom",
        max_retries: int | None = None,
        timeout: float | None = None,
        default_headers: Mapping[str, str] | None = None,
        client: openai.OpenAI | None = None,
    ):
        self.name = name
        self.default_model = model
        self.base_url = base_url
        if client is None:
            kwargs: dict[str, Any] = {"api_key": api_key or "none", "base_url": base_url}
            if max_retries is not None:
                kwargs["max_retries"] = max_retries
            if timeout is not None:
                kwargs["timeout"] = timeout
            if default_headers:
                kwargs["default_headers"] = dict(default_headers)
            client = openai.OpenAI(**kwargs)
        self.client = client

    def build_request(
        self,
        messages: Iterable[Mapping[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        tools: Iterable[Mapping[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        model = self.resolve_model(model)
        body: dict[str, Any] = {"model": model, "messages": to_openai_messages(messages)}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        tools = list(tools or ())
        if tools:
            body["tools"] = [to_openai_tool(t) for t in tools]
        body.update({k: v for k, v in extra.items() if v is not None})
        return body

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
        body = self.build_request(messages, model=model, max_tokens=max_tokens, tools=tools, **extra)
        kwargs: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
        if self.name == "openrouter":
            kwargs["extra_body"] = {"usage": {"include": True}}
        if extra_headers:
            kwargs["extra_headers"] = dict(extra_headers)
        if timeout is not None:
            kwargs["timeout"] = timeout
        started = time.monotonic()
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish = ""
        usage_raw: Any = None
        model_seen = body["model"]
        request_id = None
        try:
            stream = self.client.chat.completions.create(**body, **kwargs)
            request_id = getattr(getattr(stream, "response", None), "headers", {}).get("x-request-id")
            for chunk in stream:
                model_seen = chunk.model or model_seen
                if chunk.usage is not None:
                    usage_raw = chunk.usage
                for choice in chunk.choices or ():
                    delta = choice.delta
                    if delta is not None and delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for tc in (delta.tool_calls if delta is not None else None) or ():
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            slot["name"] += tc.function.name or ""
                            slot["arguments"] += tc.function.arguments or ""
                    if choice.finish_reason:
                        finish = choice.finish_reason
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise map_openai_error(exc, self.name) from exc
        tool_calls = []
        for index in sorted(calls):
            slot = calls[index]
            call = ToolCall(slot["id"], slot["name"], slot["arguments"] or "{}")
            tool_calls.append(call.as_message_part())
            yield call
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if tool_calls:
            message["tool_calls"] = tool_calls
        yield Final(
            message=message,
            usage=normalize_openai_usage(usage_raw),
            stop_reason=STOP_REASONS.get(finish, finish),
            model=model_seen,
            latency=time.monotonic() - started,
            request_id=request_id,
        )
