"""The simulator's HTTP server: stdlib `ThreadingHTTPServer`, HTTP/1.1, loopback.

JSON responses carry a Content-Length; SSE responses use chunked transfer encoding so a pooled
httpx2 connection stays usable after the stream (including after a mid-stream error).

API routes (what the SDKs call):
  GET  /v1/models, /v1/models/{id}
  POST /v1/messages                 (stream or not; both auth headers; both API versions)
  POST /v1/messages/count_tokens
  POST /v1/chat/completions         (OpenAI-compatible view of the same model)
Control routes (tests and benchmarks; no auth, loopback only):
  GET  /_sim/health                 ok, model names, cache mode (documented | optimistic)
  GET  /_sim/stats                  requests, errors, max prompt tokens, totals, per-request log
  POST /_sim/reset                  cache, stats, server faults, clock offset
  GET  /_sim/faults | POST /_sim/faults {"fault": "429=20", "count": 2} | {"clear": true}
  GET  /_sim/clock  | POST /_sim/clock {"advance": seconds} | {"set": t}
  GET  /_sim/tokens | POST /_sim/tokens {"scale": 1.25}   the provider tokenizer's scale (reset by /_sim/reset)
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from simulator import openai_wire
from simulator.engine import MAX_BODY_BYTES, SimError, Simulator
from simulator.faults import FAULT_HEADER, Fault, parse_fault
from simulator.sse import stream_events
from simulator.tokens import parse_token_scale

DEFAULT_SLOW_SECONDS = 0.05


@dataclass
class Response:
    status: int = 200
    json: Any = None
    chunks: Iterable[bytes] | None = None  # SSE frames, sent chunked
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before each SSE frame (the `slow` fault)


def _sse(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _error_envelope(exc: SimError, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": exc.error_type, "message": exc.message}, "request_id": request_id}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Small SSE frames go out at once instead of waiting on delayed ACKs (~0.1 s per response).
    disable_nagle_algorithm = True
    server: SimulatorHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    # -- plumbing ------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
                if len(data) > MAX_BODY_BYTES:
                    raise OverflowError
        length = int(self.headers.get("content-length") or 0)
        if length > MAX_BODY_BYTES:
            raise OverflowError
        return self.rfile.read(length) if length else b""

    def _send(self, response: Response, request_id: str) -> None:
        self.send_response(response.status)
        self.send_header("request-id", request_id)
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.chunks is None:
            payload = json.dumps(response.json, ensure_ascii=False).encode("utf-8")
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            if self.close_connection:
                self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for frame in response.chunks:
                if response.delay:
                    time.sleep(response.delay)
                self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout): nothing to do

    def _handle(self, method: str) -> None:
        request_id = "req_sim" + uuid.uuid4().hex[:24]
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            try:
                raw = self._read_body() if method == "POST" else b""
            except OverflowError:
                self.close_connection = True
                raise SimError(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.") from None
            response = self.server.route(method, path, self._headers(), raw)
        except SimError as exc:
            body = (
                openai_wire.error_body(exc)
                if path == "/v1/chat/completions"
                else _error_envelope(exc, request_id)
            )
            response = Response(exc.status, body, headers=exc.headers)
        except Exception as exc:  # a simulator bug must still answer like the API would
            response = Response(500, _error_envelope(SimError(500, "api_error", f"Internal server error ({exc!r})"), request_id))
        try:
            self._send(response, request_id)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")


class SimulatorHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The stdlib's listen backlog of 5 resets connections when 32 clients connect at once.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], sim: Simulator, *, verbose: bool = False):
        super().__init__(address, _Handler)
        self.sim = sim
        self.verbose = verbose

    # -- routing -------------------------------------------------------------------------------

    def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> Response:
        if path.startswith("/_sim/"):
            return self._control(method, path, raw)
        if method == "GET" and path == "/v1/models":
            self.sim.authenticate(headers)
            return Response(json=self.sim.models_page())
        if method == "GET" and path.startswith("/v1/models/"):
            self.sim.authenticate(headers)
            return Response(json=self.sim.model_object(self.sim.model(path[len("/v1/models/"):])))
        if method == "POST" and path == "/v1/messages":
            return self._messages(headers, raw)
        if method == "POST" and path == "/v1/messages/count_tokens":
            self.sim.authenticate(headers)
            version = self.sim.api_version(headers)
            return Response(json={"input_tokens": self.sim.count(_json(raw), api_version=version)})
        if method == "POST" and path == "/v1/chat/completions":
            return self._chat(headers, raw)
        raise SimError(404, "not_found_error", f"Not found: {method} {path}")

    def _header_fault(self, headers: Mapping[str, str]) -> Fault | None:
        try:
            return parse_fault(headers.get(FAULT_HEADER))
        except ValueError as exc:
            raise SimError(400, "invalid_request_error", f"{FAULT_HEADER}: {exc}") from None

    def _messages(self, headers: dict[str, str], raw: bytes) -> Response:
        key = self.sim.authenticate(headers)
        version = self.sim.api_version(headers)
        body = _json(raw)
        turn = self.sim.messages(body, api_key=key, api_version=version, fault=self._header_fault(headers))
        fault = turn.fault
        if not body.get("stream"):
            if fault is not None and fault.name == "midstream":
                raise SimError(500, "api_error", "Internal server error", {"retry-after-ms": str(self.sim.retry_after_ms)})
            if fault is not None and fault.name == "slow":
                # As long as the same answer would take to stream.
                time.sleep(fault.number(DEFAULT_SLOW_SECONDS) * len(stream_events(turn.message)))
            return Response(json=turn.message)
        events = stream_events(turn.message)
        if fault is not None and fault.name == "midstream":
            # Cut after the first delta (or the first block start) and report overload in-stream.
            cut = next((i for i, (n, _) in enumerate(events) if n == "content_block_delta"), 2) + 1
            events = events[:cut] + [
                ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            ]
        delay = fault.number(DEFAULT_SLOW_SECONDS) if fault is not None and fault.name == "slow" else 0.0
        return Response(chunks=[_sse(n, d) for n, d in events], delay=delay)

    def _chat(self, headers: dict[str, str], raw: bytes) -> Response:
        body = _json(raw)
        turn = openai_wire.run(self.sim, body, headers, self._header_fault(headers))
        created = int(self.sim.clock.now())
        fault = turn.fault
        midstream = fault is not None and fault.name == "midstream"
        delay = fault.number(DEFAULT_SLOW_SECONDS) if fault is not None and fault.name == "slow" else 0.0
        if not body.get("stream"):
            if midstream:
                raise SimError(500, "api_error", "Internal server error", {"retry-after-ms": str(self.sim.retry_after_ms)})
            return Response(json=openai_wire.completion(turn, created))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = list(openai_wire.stream_chunks(turn, created, include_usage=include_usage, midstream=midstream))
        return Response(chunks=chunks, delay=delay)

    def _control(self, method: str, path: str, raw: bytes) -> Response:
        sim = self.sim
        body = _json(raw) if raw else {}
        if path == "/_sim/health":
            return Response(json={"ok": True, "models": sim.catalog.names(), "cache_mode": sim.cache.mode})
        if path == "/_sim/stats" and method == "GET":
            return Response(json=sim.stats())
        if path == "/_sim/reset" and method == "POST":
            sim.reset()
            return Response(json={"ok": True})
        if path == "/_sim/faults":
            if method == "POST":
                if body.get("clear"):
                    sim.faults.clear()
                else:
                    try:
                        fault = parse_fault(str(body.get("fault") or ""))
                    except ValueError as exc:
                        raise SimError(400, "invalid_request_error", str(exc)) from None
                    if fault is None:
                        raise SimError(400, "invalid_request_error", "fault: Field required")
                    count = body.get("count")
                    sim.faults.push(fault, None if count is None else int(count))
            return Response(json={"faults": sim.faults.snapshot()})
        if path == "/_sim/clock":
            if method == "POST":
                try:
                    if "advance" in body:
                        sim.clock.advance(float(body["advance"]))
                    elif "set" in body:
                        sim.clock.set(float(body["set"]))
                    elif body.get("reset"):
                        sim.clock.reset()
                except ValueError as exc:
                    raise SimError(400, "invalid_request_error", str(exc)) from None
            return Response(json=sim.clock.snapshot())
        if path == "/_sim/tokens":
            if method == "POST":
                try:
                    sim.count_tokens.scale = parse_token_scale(body.get("scale"))
                except ValueError as exc:
                    raise SimError(400, "invalid_request_error", str(exc)) from None
            return Response(json={"scale": sim.count_tokens.scale})
        raise SimError(404, "not_found_error", f"Not found: {method} {path}")


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw.decode("utf-8")) if raw else {}
    except (UnicodeDecodeError, ValueError):
        raise SimError(400, "invalid_request_error", "There was an error parsing the body of your request.") from None


class SimulatorServer:
    """A running simulator (`start_simulator`). Use as a context manager or call `stop()`."""

    def __init__(self, httpd: SimulatorHTTPServer, thread: threading.Thread):
        self.httpd = httpd
        self.thread = thread
        self.sim = httpd.sim
        host, port = httpd.server_address[:2]
        self.host, self.port = str(host), int(port)  # an IPv4 socket's (str, int)

    @property
    def base_url(self) -> str:
        """What `anthropic.Anthropic(base_url=…)` takes (the SDK appends /v1/messages)."""
        return f"http://{self.host}:{self.port}"

    url = base_url

    @property
    def openai_base_url(self) -> str:
        """What `openai.OpenAI(base_url=…)` takes (the SDK appends /chat/completions)."""
        return f"{self.base_url}/v1"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> SimulatorServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_simulator(
    port: int = 0,
    host: str = "127.0.0.1",
    *,
    simulator: Simulator | None = None,
    verbose: bool = False,
    **config: Any,
) -> SimulatorServer:
    """Start a simulator in a background thread and return it running (port 0 = a free port).

    `config` goes to `Simulator.from_env` (HERMES_SIM_* variables, overridden by keywords such as
    `models=`, `clock=`, `api_keys=`, `faults=`, `retry_after_ms=`).
    """
    sim = simulator or Simulator.from_env(**config)
    httpd = SimulatorHTTPServer((host, port), sim, verbose=verbose)
    thread = threading.Thread(target=httpd.serve_forever, name=f"simulator-{httpd.server_address[1]}", daemon=True)
    thread.start()
    return SimulatorServer(httpd, thread)
