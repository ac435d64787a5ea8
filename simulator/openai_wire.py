"""`POST /v1/chat/completions`: the simulator seen through an OpenAI-compatible route.

Lets the OpenAI-compatible provider (OpenRouter, Nous, custom base_url) be tested with the real
`openai` SDK over HTTP. The request is converted with `llm.convert` and runs through the same
pipeline as `/v1/messages` (validation, prefix cache, policy, faults); usage is reported the way
OpenRouter reports it for Claude: `prompt_tokens` includes cached tokens, with
`prompt_tokens_details.cached_tokens` and `.cache_write_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from llm.convert import from_anthropic_response, to_anthropic_request
from simulator.engine import SimError, Simulator, Turn
from simulator.faults import Fault
from simulator.validation import API_VERSION_2023

FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def error_body(exc: SimError) -> dict[str, Any]:
    return {"error": {"message": exc.message, "type": exc.error_type, "code": exc.status}}


def authenticate(sim: Simulator, headers: Mapping[str, str]) -> str:
    auth = headers.get("authorization") or ""
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    return sim.authenticate({"x-api-key": key} if key else {})


def run(sim: Simulator, body: Any, headers: Mapping[str, str], fault: Fault | None) -> Turn:
    key = authenticate(sim, headers)
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise SimError(400, "invalid_request_error", "messages: Field required")
    info = sim.model(body.get("model"))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or info.max_output
    extra: dict[str, Any] = {}
    if body.get("stop"):
        stop = body["stop"]
        extra["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    anthropic_body = to_anthropic_request(
        body["messages"], model=info.name, max_tokens=int(max_tokens), tools=body.get("tools"), **extra
    )
    return sim.messages(
        anthropic_body, api_key=key, api_version=API_VERSION_2023, fault=fault, path="/v1/chat/completions"
    )


def _usage(turn: Turn) -> dict[str, Any]:
    u = turn.message["usage"]
    prompt = u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": u["output_tokens"],
        "total_tokens": prompt + u["output_tokens"],
        "prompt_tokens_details": {
            "cached_tokens": u["cache_read_input_tokens"],
            "cache_write_tokens": u["cache_creation_input_tokens"],
        },
    }


def completion(turn: Turn, created: int) -> dict[str, Any]:
    internal = from_anthropic_response(turn.message)
    message: dict[str, Any] = {"role": "assistant", "content": internal["content"] or None}
    if internal.get("tool_calls"):
        message["tool_calls"] = internal["tool_calls"]
    return {
        "id": "chatcmpl-" + turn.message["id"],
        "object": "chat.completion",
        "created": created,
        "model": turn.message["model"],
        "choices": [
            {"index": 0, "message": message, "finish_reason": FINISH_REASONS.get(turn.message["stop_reason"], "stop")}
        ],
        "usage": _usage(turn),
    }


def stream_chunks(turn: Turn, created: int, *, include_usage: bool, midstream: bool) -> Iterator[bytes]:
    """SSE `data:` lines; a midstream fault sends one content chunk, then an error object."""
    base = {"id": "chatcmpl-" + turn.message["id"], "object": "chat.completion.chunk", "created": created,
            "model": turn.message["model"]}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    internal = from_anthropic_response(turn.message)
    text = internal["content"]
    words = text.split(" ") if text else []
    error = {"error": {"message": "Overloaded", "type": "overloaded_error", "code": 529}}
    for i in range(0, len(words), 12):
        piece = " ".join(words[i : i + 12]) + (" " if i + 12 < len(words) else "")
        yield chunk({"content": piece})
        if midstream:
            break
    if midstream:
        yield b"data: " + json.dumps(error).encode() + b"\n\n"
        return
    for n, call in enumerate(internal.get("tool_calls") or ()):
        yield chunk({"tool_calls": [{"index": n, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"], "arguments": ""}}]})
        yield chunk({"tool_calls": [{"index": n, "function": {"arguments": call["function"]["arguments"]}}]})
    yield chunk({}, FINISH_REASONS.get(turn.message["stop_reason"], "stop"))
    if include_usage:
        data = dict(base, choices=[], usage=_usage(turn))
        yield b"data: " + json.dumps(data).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"
