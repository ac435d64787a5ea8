"""The SSE frames of a Messages response, in the order the SDK's stream accumulator requires:
message_start (usage with input and cache counts), per block content_block_start -> deltas ->
content_block_stop (one ping after the first block starts, text or tool_use), message_delta (stop reason and
cumulative usage), message_stop. Every frame has an `event:` line: the SDK skips nameless ones.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any


def stream_events(message: Mapping[str, Any], words_per_delta: int = 12) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events for `message`, in the order the SDK's accumulator requires."""
    start = copy.deepcopy(dict(message))
    start["content"] = []
    start["stop_reason"] = None
    start["stop_sequence"] = None
    start["usage"] = dict(start["usage"], output_tokens=1)
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            )
            if index == 0:
                events.append(("ping", {"type": "ping"}))
            words = block["text"].split(" ")
            for i in range(0, len(words), words_per_delta):
                piece = " ".join(words[i : i + words_per_delta])
                if i + words_per_delta < len(words):
                    piece += " "
                if piece:
                    events.append(
                        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}})
                    )
        elif block["type"] == "tool_use":
            events.append(
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}},
                    },
                )
            )
            if index == 0:  # a reply that is only a tool call ("call tool <name>")
                events.append(("ping", {"type": "ping"}))
            raw = json.dumps(block["input"], ensure_ascii=False)
            half = len(raw) // 2
            for piece in (raw[:half], raw[half:]):
                if piece:
                    events.append(
                        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}})
                    )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    usage = message["usage"]
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"], "stop_details": None},
                "usage": {
                    "output_tokens": usage["output_tokens"],
                    "input_tokens": usage["input_tokens"],
                    "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
                    "cache_read_input_tokens": usage["cache_read_input_tokens"],
                },
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events
