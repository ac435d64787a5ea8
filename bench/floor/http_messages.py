"""The floor of the simulator's HTTP path: a bare Messages endpoint on the simulator's own server stack.

Same library and settings as the simulator's server (stdlib ``ThreadingHTTPServer``, HTTP/1.1
keep-alive, Nagle off, one thread per connection, JSON with a Content-Length, SSE as chunked
frames written and flushed one by one), but no model behind it: ``POST /v1/messages`` reads the
body, looks at its ``stream`` flag and answers one fixed, pre-encoded reply of the simulator's
shape and size (a ~830-byte message, or the nine SSE frames of the same reply). Anything else
gets a fixed 404. What the simulator costs beyond this is what it adds per request.

    python -m bench.floor.http_messages --host 127.0.0.1 --port 8766
"""
from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TEXT = ("You said: \"Hello from the benchmark.\". Tool file compression message goal result prefix track "
         "detail history plan window summary state. Check step goal cache model context tokens reply.")
_USAGE = {"input_tokens": 12, "output_tokens": 39, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
          "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
          "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0}, "service_tier": "standard",
          "inference_geo": "not_available", "output_tokens_details": None, "speed": None}
MESSAGE: dict[str, Any] = {
    "id": "msg_floor000000000000000001", "type": "message", "role": "assistant", "model": "sim-claude-200k",
    "content": [{"type": "text", "text": _TEXT}], "stop_reason": "end_turn", "stop_sequence": None,
    "stop_details": None, "container": None, "usage": _USAGE,
}


def _events() -> list[tuple[str, dict[str, Any]]]:
    """The reply as the SDK's stream accumulator expects it: start, block with three deltas, stop."""
    start = dict(MESSAGE, content=[], stop_reason=None, usage=dict(_USAGE, output_tokens=1))
    words = _TEXT.split(" ")
    pieces = [" ".join(words[i:i + 12]) + (" " if i + 12 < len(words) else "") for i in range(0, len(words), 12)]
    return [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("ping", {"type": "ping"}),
        *(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                   "delta": {"type": "text_delta", "text": piece}}) for piece in pieces),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None, "stop_details": None},
                           "usage": {k: _USAGE[k] for k in ("output_tokens", "input_tokens",
                                                            "cache_creation_input_tokens", "cache_read_input_tokens")}}),
        ("message_stop", {"type": "message_stop"}),
    ]


# Encoded once: the floor does no per-request work beyond HTTP and reading the stream flag.
JSON_BODY = json.dumps(MESSAGE).encode("utf-8")
SSE_CHUNKS = [f"{len(frame):x}\r\n".encode() + frame + b"\r\n"
              for frame in (f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in _events())]
NOT_FOUND = b'{"type": "error", "error": {"type": "not_found_error", "message": "Not found"}}'
REQUEST_ID = "req_floor000000000000000001"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as the simulator: small SSE frames leave at once

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("request-id", REQUEST_ID)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path.split("?", 1)[0] != "/v1/messages":
            self._json(404, NOT_FOUND)
            return
        try:
            stream = bool(json.loads(raw or b"{}").get("stream"))
        except ValueError:
            self._json(400, b'{"type": "error", "error": {"type": "invalid_request_error", "message": "bad JSON"}}')
            return
        if not stream:
            self._json(200, JSON_BODY)
            return
        self.send_response(200)
        self.send_header("request-id", REQUEST_ID)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for chunk in SSE_CHUNKS:
                self.wfile.write(chunk)
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._json(404, NOT_FOUND)


class FloorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # as the simulator's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor.http_messages", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8766)
    args = parser.parse_args(argv)
    httpd = FloorHTTPServer((args.host, args.port), _Handler)
    print(f"floor listening on http://{args.host}:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
