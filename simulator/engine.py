"""The simulator's state and request pipeline, independent of HTTP framing.

`Simulator.messages(...)` runs one Messages request: auth and version were checked by the caller;
here come faults, model lookup, strict validation, cache accounting, the deterministic reply and
the stats record. It returns a complete Anthropic `Message` dict; the HTTP layer decides whether
to send it as JSON or as SSE events. Failures raise `SimError` carrying the API's status, type
and text.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compression.core.tokens import MESSAGE_OVERHEAD_TOKENS
from compression.core.tokens import count_tokens as product_count_tokens
from llm.models import ModelCatalog, ModelInfo, catalog_from_json
from llm.usage import Usage, compute_cost
from simulator import blocks as blocks_mod
from simulator import policy
from simulator.cache import DOCUMENTED, PrefixCache, check_mode
from simulator.clock import SimClock
from simulator.faults import Fault, FaultQueue, parse_fault_spec
from simulator.media import image_block_tokens, image_info
from simulator.tokens import MemoCounter, ScaledCounter, parse_token_scale
from simulator.validation import (
    SUPPORTED_API_VERSIONS,
    InvalidRequest,
    prompt_too_long_message,
    validate_messages_request,
)

DEFAULT_RETRY_AFTER_MS = 10
MAX_BODY_BYTES = 32 * 1024 * 1024  # the Messages API's request cap
LOG_SIZE = 5_000
RATE_LIMIT_TEXT = (
    "This request would exceed your organization's rate limit of 30,000 input tokens per minute "
    "(org: 00000000-0000-0000-0000-000000000000, model: {model}). For details, refer to: "
    "https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. "
    "Please reduce the prompt length or the maximum tokens requested, or try again later."
)
LONG_CONTEXT_TEXT = "Extra usage is required for long context requests."



def logged_images(messages: Any) -> list[dict[str, int]]:
    """Each base64 image block of a request (nested ones in tool results too) as the request log
    records it: its real pixel size and what it costs (``/_sim/stats``)."""
    found: list[dict[str, int]] = []
    for item in messages if isinstance(messages, list) else ():
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "image":
            source = item.get("source")
            source = source if isinstance(source, Mapping) else {}
            got = image_info(str(source.get("data") or "")) if source.get("type") == "base64" else None
            if got is not None:
                found.append({"width": got.width, "height": got.height, "tokens": image_block_tokens(item)})
        found += logged_images(item.get("content"))
    return found

class SimError(Exception):
    """An API error response: HTTP status, `error.type`, `error.message`, extra headers."""

    def __init__(self, status: int, error_type: str, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message
        self.headers = dict(headers or {})


@dataclass(frozen=True)
class Turn:
    message: dict[str, Any]
    fault: Fault | None
    kind: str
    prompt_tokens: int


def _load_models_env(value: str) -> ModelCatalog:
    text = value.strip()
    if not text.startswith(("[", "{")):
        text = Path(text).read_text(encoding="utf-8")
    return catalog_from_json(text)


class Simulator:
    def __init__(
        self,
        *,
        models: ModelCatalog | Iterable[ModelInfo] | None = None,
        clock: SimClock | None = None,
        count_tokens: Callable[[str], int] = product_count_tokens,
        message_overhead: int = MESSAGE_OVERHEAD_TOKENS,
        api_keys: Iterable[str] | None = None,
        strict_roles: bool = False,
        retry_after_ms: int = DEFAULT_RETRY_AFTER_MS,
        faults: Iterable[tuple[Fault, int | None]] = (),
        cache_mode: str = DOCUMENTED,
        token_scale: float = 1.0,
    ):
        if models is None:
            models = ModelCatalog()
        self.catalog = models if isinstance(models, ModelCatalog) else ModelCatalog(models)
        self.clock = clock or SimClock()
        self.count_tokens = ScaledCounter(MemoCounter(count_tokens), parse_token_scale(token_scale))
        self.message_overhead = message_overhead
        self.api_keys = frozenset(api_keys) if api_keys else None
        self.strict_roles = strict_roles
        self.retry_after_ms = retry_after_ms
        self.faults = FaultQueue()
        for fault, count in faults:
            self.faults.push(fault, count)
        self.cache = PrefixCache(mode=cache_mode)
        self._lock = threading.Lock()
        self._ids = 0
        self._reset_stats()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Simulator:
        """Configuration from HERMES_SIM_* variables; keyword arguments win."""
        env = os.environ if env is None else env
        kwargs: dict[str, Any] = {}
        if env.get("HERMES_SIM_MODELS"):
            kwargs["models"] = _load_models_env(env["HERMES_SIM_MODELS"])
        if env.get("HERMES_SIM_FAULT"):
            fault, count = parse_fault_spec(env["HERMES_SIM_FAULT"])
            if fault is not None:
                kwargs["faults"] = [(fault, count)]
        if env.get("HERMES_SIM_API_KEYS"):
            kwargs["api_keys"] = [k.strip() for k in env["HERMES_SIM_API_KEYS"].split(",") if k.strip()]
        if env.get("HERMES_SIM_RETRY_AFTER_MS"):
            kwargs["retry_after_ms"] = int(env["HERMES_SIM_RETRY_AFTER_MS"])
        if env.get("HERMES_SIM_STRICT_ROLES", "").lower() in ("1", "true", "yes", "on"):
            kwargs["strict_roles"] = True
        if env.get("HERMES_SIM_TOKEN_SCALE"):
            kwargs["token_scale"] = parse_token_scale(env["HERMES_SIM_TOKEN_SCALE"])
        if env.get("HERMES_SIM_CACHE"):
            try:
                kwargs["cache_mode"] = check_mode(env["HERMES_SIM_CACHE"].strip().lower())
            except ValueError as exc:
                raise ValueError(f"HERMES_SIM_CACHE: {exc}") from None
        kwargs.update(overrides)
        return cls(**kwargs)

    # -- state ---------------------------------------------------------------------------------

    def _reset_stats(self) -> None:
        self._requests = 0
        self._errors = 0
        self._max_prompt = 0
        self._totals = {"input": 0, "output": 0, "cache_read": 0, "cache_write_5m": 0, "cache_write_1h": 0,
                        "cost_usd": 0.0}
        self._log: deque[dict[str, Any]] = deque(maxlen=LOG_SIZE)

    def reset(self) -> None:
        """Forget the cache, stats and server faults; the clock returns to real time and the token
        scale to its configured value."""
        with self._lock:
            self.cache.clear()
            self.faults.clear()
            self.clock.reset()
            self.count_tokens.scale = self.count_tokens.default
            self._reset_stats()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": self._requests,
                "errors": self._errors,
                "max_prompt_tokens": self._max_prompt,
                "totals": dict(self._totals),
                "cache_entries": len(self.cache),
                "cache_mode": self.cache.mode,
                "token_scale": self.count_tokens.scale,
                "clock": self.clock.now(),
                "log": list(self._log),
            }

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_sim{self._ids:020x}"

    def _record(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._requests += 1
            entry["n"] = self._requests
            entry["time"] = self.clock.now()
            if entry.get("status", 200) != 200:
                self._errors += 1
            prompt = entry.get("prompt_tokens") or 0
            self._max_prompt = max(self._max_prompt, prompt)
            for key in self._totals:
                self._totals[key] += entry.get(key, 0) or 0
            self._log.append(entry)

    # -- checks --------------------------------------------------------------------------------

    def authenticate(self, headers: Mapping[str, str]) -> str:
        """The API key from `x-api-key` (preferred, as the API does) or `Authorization: Bearer`."""
        key = headers.get("x-api-key")
        if not key:
            auth = headers.get("authorization") or ""
            if auth.lower().startswith("bearer "):
                key = auth[7:].strip()
        if not key:
            raise SimError(401, "authentication_error", "x-api-key header is required")
        if self.api_keys is not None and key not in self.api_keys:
            raise SimError(401, "authentication_error", "invalid x-api-key")
        return key

    def api_version(self, headers: Mapping[str, str]) -> str:
        version = headers.get("anthropic-version")
        if not version:
            raise SimError(400, "invalid_request_error", "anthropic-version: header is required")
        if version not in SUPPORTED_API_VERSIONS:
            raise SimError(400, "invalid_request_error", f"anthropic-version: invalid version '{version}'")
        return version

    def model(self, name: Any) -> ModelInfo:
        info = self.catalog.get(name) if isinstance(name, str) else None
        if info is None:
            raise SimError(404, "not_found_error", f"model: {name}")
        return info

    def prompt_tokens(self, body: Mapping[str, Any]) -> int:
        return blocks_mod.prompt_tokens(body, self.count_tokens, message_overhead=self.message_overhead)

    # -- requests ------------------------------------------------------------------------------

    def take_fault(self, header_fault: Fault | None, body: Mapping[str, Any] | None = None) -> Fault | None:
        """The request's own fault, else the next server-wide one (consumed). A compression prompt
        leaves an `overflow_turn` fault for the next chat request."""
        if header_fault is not None:
            return header_fault
        queued = self.faults.peek()
        if queued is not None and queued.name == "overflow_turn" and body is not None and _is_compression(body):
            return None
        return self.faults.take()

    def _raise_fault(self, fault: Fault, info: ModelInfo, body: Mapping[str, Any]) -> None:
        if fault.name in ("overflow", "overflow_turn"):
            window = int(fault.number(info.context_window))
            tokens = max(self.prompt_tokens(body), window + 1)
            raise SimError(400, "invalid_request_error", prompt_too_long_message(tokens, window))
        if fault.name == "413":
            raise SimError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")
        if fault.name == "429":
            ms = int(fault.number(self.retry_after_ms))
            headers = {"retry-after-ms": str(ms), "retry-after": str(max(1, math.ceil(ms / 1000)))}
            raise SimError(429, "rate_limit_error", RATE_LIMIT_TEXT.format(model=info.name), headers)
        if fault.name == "long_context":
            raise SimError(429, "rate_limit_error", LONG_CONTEXT_TEXT, {"retry-after-ms": str(self.retry_after_ms)})
        # 5xx answers carry `retry-after-ms` too (the real API may not): the SDK's own retries then
        # take milliseconds, so fault tests and benchmarks stay fast.
        quick_retry = {"retry-after-ms": str(self.retry_after_ms)}
        if fault.name == "500":
            raise SimError(500, "api_error", "Internal server error", quick_retry)
        if fault.name == "529":
            raise SimError(529, "overloaded_error", "Overloaded", quick_retry)
        if fault.name == "401":
            raise SimError(401, "authentication_error", "invalid x-api-key")

    def messages(
        self,
        body: Any,
        *,
        api_key: str,
        api_version: str,
        fault: Fault | None = None,
        path: str = "/v1/messages",
    ) -> Turn:
        """One Messages request. `fault` is the request's own (header) fault, if any."""
        entry: dict[str, Any] = {"path": path, "stream": bool(isinstance(body, Mapping) and body.get("stream"))}
        started = time.monotonic()
        try:
            turn = self._messages(body, api_key=api_key, api_version=api_version, fault=fault, entry=entry)
        except SimError as exc:
            entry.update(status=exc.status, error=exc.message[:300])
            self._record(entry)
            raise
        entry["latency_ms"] = round((time.monotonic() - started) * 1000, 2)
        self._record(entry)
        return turn

    def _messages(
        self, body: Any, *, api_key: str, api_version: str, fault: Fault | None, entry: dict[str, Any]
    ) -> Turn:
        if not isinstance(body, Mapping):
            raise SimError(400, "invalid_request_error", "body: Input should be a valid dictionary")
        info = self.model(body.get("model"))
        entry["model"] = info.name
        fault = self.take_fault(fault, body)
        if fault is not None:
            entry["fault"] = str(fault)
            self._raise_fault(fault, info, body)
        try:
            validate_messages_request(
                body,
                context_window=info.context_window,
                max_output=info.max_output,
                count_tokens=self.count_tokens,
                api_version=api_version,
                strict_roles=self.strict_roles,
                message_overhead=self.message_overhead,
                media_window=info.context_window,
            )
        except InvalidRequest as exc:
            raise SimError(400, "invalid_request_error", exc.message) from None
        images = logged_images(body.get("messages"))
        if images:
            entry["images"] = images

        flat = blocks_mod.flatten(body)
        tokens = [b.tokens(self.count_tokens, self.message_overhead) for b in flat]
        hashes = blocks_mod.prefix_hashes(flat, f"{api_key}\x00{info.name}")
        markers = blocks_mod.markers(body, flat)
        cache = self.cache.account(tokens, hashes, markers, now=self.clock.now(), min_tokens=info.min_cache_tokens,
                                   positions=blocks_mod.lookback_positions(flat))

        empty_summary = fault is not None and fault.name == "empty_summary"
        reply = policy.respond(body, count_tokens=self.count_tokens, empty_summary=empty_summary)
        blocks, stop_reason, stop_sequence = _apply_stop_sequences(reply.blocks, reply.stop_reason, body)
        # The API bills at least one output token, even for an empty answer.
        output = max(1, sum(self.count_tokens(blocks_mod.text_and_images(b)[0]) for b in blocks))
        usage = {
            "input_tokens": cache.input,
            "output_tokens": output,
            "cache_creation_input_tokens": cache.write,
            "cache_read_input_tokens": cache.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": cache.write_5m,
                "ephemeral_1h_input_tokens": cache.write_1h,
            },
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard",
            "inference_geo": "not_available",
            "output_tokens_details": None,
            "speed": None,
        }
        if fault is not None and fault.name == "no_usage":
            # A server that reports no prompt usage (as some OpenAI-compatible ones do).
            usage.update(input_tokens=0, cache_creation_input_tokens=0, cache_read_input_tokens=0,
                         cache_creation={"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0})
        message = {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": info.name,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "stop_details": None,
            "container": None,
            "usage": usage,
        }
        entry.update(
            status=200,
            kind=reply.kind,
            messages=len(body.get("messages") or ()),
            prompt_tokens=cache.total,
            input=cache.input,
            cache_read=cache.read,
            cache_write=cache.write,
            cache_write_5m=cache.write_5m,
            cache_write_1h=cache.write_1h,
            output=output,
            stop_reason=stop_reason,
            # What the call would cost at the model's catalogue prices (USD).
            cost_usd=compute_cost(
                Usage(input=cache.input, output=output, cache_read=cache.read, cache_write=cache.write,
                      cache_write_5m=cache.write_5m, cache_write_1h=cache.write_1h),
                info.price,
            ).cost,
        )
        return Turn(message=message, fault=fault, kind=reply.kind, prompt_tokens=cache.total)

    def count(self, body: Any, *, api_version: str) -> int:
        """`/v1/messages/count_tokens`: the validated body's prompt size (no faults, no cache)."""
        if not isinstance(body, Mapping):
            raise SimError(400, "invalid_request_error", "body: Input should be a valid dictionary")
        info = self.model(body.get("model"))
        try:
            validate_messages_request(
                body, api_version=api_version, strict_roles=self.strict_roles, require_max_tokens=False,
                media_window=info.context_window,
            )
        except InvalidRequest as exc:
            raise SimError(400, "invalid_request_error", exc.message) from None
        return self.prompt_tokens(body)

    def model_object(self, info: ModelInfo) -> dict[str, Any]:
        return {
            "type": "model",
            "id": info.name,
            "display_name": info.display_name or info.name,
            "created_at": "2026-01-01T00:00:00Z",
            "max_input_tokens": info.context_window,
            "max_tokens": info.max_output,
        }

    def models_page(self) -> dict[str, Any]:
        data = [self.model_object(m) for m in self.catalog]
        return {
            "data": data,
            "has_more": False,
            "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None,
        }


def _apply_stop_sequences(
    content: list[dict[str, Any]], stop_reason: str, body: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], str, str | None]:
    sequences = [s for s in body.get("stop_sequences") or () if isinstance(s, str) and s]
    if not sequences or not content or content[0].get("type") != "text" or len(content) != 1:
        return content, stop_reason, None
    text = content[0]["text"]
    hits = [(text.find(s), s) for s in sequences if s in text]
    if not hits:
        return content, stop_reason, None
    at, seq = min(hits)
    return [dict(content[0], text=text[:at])], "stop_sequence", seq


def _is_compression(body: Mapping[str, Any]) -> bool:
    """Whether the request's last message is a compression prompt (the summariser's request)."""
    messages = body.get("messages") or ()
    last = messages[-1] if messages else None
    if not isinstance(last, Mapping) or last.get("role") != "user":
        return False
    content = last.get("content")
    text = content if isinstance(content, str) else " ".join(
        str(b.get("text", "")) for b in content or () if isinstance(b, Mapping) and b.get("type") == "text")
    return policy.summary_mod.is_compression_prompt(text)
