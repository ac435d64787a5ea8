"""The worker's MCP connections, through the official SDK (`mcp.Client`).

One connection per configured server per worker process, held open on one background event loop
(a daemon thread): the agent loop's threads call into it and wait, polling Stop. Guarantees:

- A call never raises into the agent loop: a timeout, a server that died, a protocol error and a
  tool's own `isError` each come back as an error result the model reads.
- A server that died is restarted on its next use. `MAX_FAILURES` failed starts or crashes in a
  row mark it `down`: it is left out of the offered tools until an admin reloads it (the row's
  `generation` moves, and the worker's watcher reconnects).
- A stdio server gets only the environment its configuration gives, a minimal PATH, and the
  SDK's few safe defaults (HOME, LOGNAME, SHELL, TERM, USER); none of the application's
  settings or secrets. It runs in its own process group (the SDK starts a new session), and is
  stopped with the worker; a worker killed outright closes the server's stdin, on which an MCP
  stdio server exits.
- What the workers learn (state, tools, last error, last call latency) is written on the
  server's row: the admin, the staff dashboard and the offered tools read it from there.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections
from django.db.models import F
from django.utils import timezone

from compression.models import MCPServer
from sessions.agent.tools.mcp import offer

log = logging.getLogger(__name__)

MAX_FAILURES = 3
STOP_POLL_SECONDS = 0.25
WATCH_SECONDS = 2.0
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
STOPPED = object()


def minimal_path() -> str:
    """The interpreter's own folder (where a server installed beside the app lives) and the system's."""
    return f"{os.path.dirname(sys.executable)}:{SYSTEM_PATH}"


def _secrets(raw: str) -> dict[str, str]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def server_environment(server) -> dict[str, str]:
    """What a stdio server is started with, on top of the SDK's safe defaults: its configured
    variables and a minimal PATH (the configured PATH wins)."""
    return {"PATH": minimal_path(), **_secrets(server.env)}


def signature(server) -> str:
    """What a connection was made from: any change (or a Reload, which raises ``generation``)
    means a new connection. A row deleted and re-created under the same id differs too."""
    fields = (server.name, server.transport, server.command, server.args, server.env, server.url,
              server.headers, server.generation)
    return hashlib.sha256(json.dumps(fields, default=str).encode()).hexdigest()


class CallFailed(Exception):
    """A call that produced no result; the message is what the model reads."""


class CallAbandoned(CallFailed):
    """A call that went past its timeout without the SDK's own timeout answering; the server may
    still be working on it, and its connection is kept."""


@dataclass
class _Connection:
    signature: str
    timeout: float
    tools: list[dict] = field(default_factory=list)
    client: Any = None
    closing: asyncio.Event | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    task: Any = None
    error: BaseException | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self.task is not None and not self.task.done()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "…"


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str], timeout: float):
    # The SDK and its HTTP client load on first use only: importing them takes over a second,
    # which a process with no MCP server never pays.
    import httpx2
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, create_mcp_http_client

    limits = httpx2.Timeout(timeout, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    async with create_mcp_http_client(headers=headers, timeout=limits) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


def _target(server):
    from mcp import StdioServerParameters, stdio_client  # the SDK (~1.2 s to import) loads on first use only

    if server.transport == "http":
        return _http_transport(server.url, _secrets(server.headers), float(server.connect_timeout))
    params = StdioServerParameters(command=server.command, args=[str(a) for a in server.args or []],
                                   env=server_environment(server))
    # The server's stderr goes to the worker's own (a Celery worker replaces sys.stderr with a
    # logging proxy that has no file descriptor to hand a child).
    return stdio_client(params, errlog=sys.__stderr__ or sys.stderr)


class MCPClients:
    """The connections of this process, keyed by server id."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._connections: dict[int, _Connection] = {}
        self._connecting: dict[int, threading.Lock] = {}
        self._tried: dict[int, str] = {}  # server id -> the signature this process last connected with

    # --- the event loop ------------------------------------------------------------------------

    def _run(self, coro) -> concurrent.futures.Future:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mcp-clients", daemon=True).start()
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _hold(self, conn: _Connection, target) -> None:
        from mcp import Client  # the SDK (~1.2 s to import) loads on first use only

        conn.closing = asyncio.Event()
        try:
            async with Client(target) as client:
                tools: list[dict[str, Any]] = []
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(offer.listed(t) for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                conn.tools, conn.client = tools, client
                conn.ready.set()
                await conn.closing.wait()
        except BaseException as exc:
            conn.error = exc
            if not isinstance(exc, (Exception, asyncio.CancelledError)):
                raise
        finally:
            conn.client = None
            conn.ready.set()

    async def _close(self, conn: _Connection) -> None:
        if conn.closing is not None:
            conn.closing.set()
        if conn.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(conn.task), timeout=10)
            if not conn.task.done():
                conn.task.cancel()

    async def _start(self, conn: _Connection, target) -> None:
        conn.task = asyncio.ensure_future(self._hold(conn, target))

    # --- connecting ----------------------------------------------------------------------------

    def connection(self, server) -> _Connection:
        """The open connection to ``server`` at its current generation, started (and its tools
        listed and recorded) when there is none. Raises CallFailed with the reason it could not be."""
        with self._lock:
            gate = self._connecting.setdefault(server.id, threading.Lock())
        with gate:
            conn = self._connections.get(server.id)
            if conn is not None and conn.alive and conn.signature == signature(server):
                conn.timeout = float(server.timeout)  # a changed timeout needs no new connection
                return conn
            if conn is not None:
                self.close(server.id)
            return self._connect(server)

    def _connect(self, server) -> _Connection:
        conn = _Connection(signature(server), float(server.timeout))
        started = time.monotonic()
        try:
            target = _target(server)
            self._run(self._start(conn, target)).result(timeout=5)
        except Exception as exc:
            self._failed(server, f"could not start: {_describe(exc)}")
            raise CallFailed(f"the MCP server '{server.name}' could not start: {_describe(exc)}") from None
        if not conn.ready.wait(float(server.connect_timeout)) or conn.client is None:
            self._run(self._close(conn))
            reason = (f"did not answer within {server.connect_timeout:g} s" if conn.error is None
                      else f"could not start: {_describe(conn.error)}")
            self._failed(server, reason)
            raise CallFailed(f"the MCP server '{server.name}' {reason}")
        with self._lock:
            self._connections[server.id] = conn
        self._record(server.id, state="connected", tools=conn.tools, failures=0, last_error="",
                     state_generation=server.generation, last_latency_ms=None)
        log.info("MCP server %s connected in %.2f s with %d tools", server.name, time.monotonic() - started,
                 len(conn.tools))
        return conn

    def close(self, server_id: int) -> None:
        with self._lock:
            conn = self._connections.pop(server_id, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                self._run(self._close(conn)).result(timeout=15)

    def close_all(self) -> None:
        for server_id in list(self._connections):
            self.close(server_id)

    # --- calling -------------------------------------------------------------------------------

    def call(self, server, tool: str, arguments: dict, *, should_stop: Callable[[], bool] = lambda: False,
             max_chars: int | None = None):
        """Call ``tool`` on ``server``: (content, is_error), or STOPPED when Stop came first."""
        if server.state == "down" and server.state_generation == server.generation:
            return (f"Error: the MCP server '{server.name}' is down after repeated failures "
                    f"({server.last_error or 'no detail'}); an administrator can reload it."), True
        try:
            conn = self._live(server)
        except CallFailed as exc:
            return f"Error: {exc}", True
        started = time.monotonic()
        future = self._run(self._call(conn, tool, arguments))
        deadline = started + conn.timeout + 5  # the SDK's own read timeout answers first
        result: object
        while True:
            try:
                result = future.result(timeout=STOP_POLL_SECONDS)
                break
            except concurrent.futures.TimeoutError:
                if should_stop():
                    future.cancel()
                    return STOPPED
                if time.monotonic() > deadline:
                    future.cancel()
                    result = CallAbandoned(f"the call to {tool} on MCP server '{server.name}' took longer than "
                                           f"{conn.timeout:g} s and was abandoned")
                    break
            except concurrent.futures.CancelledError:
                return STOPPED
        latency = (time.monotonic() - started) * 1000
        if isinstance(result, BaseException):
            return self._call_failed(server, conn, tool, result, latency), True
        self._record(server.id, last_latency_ms=latency)
        kwargs = {} if max_chars is None else {"max_chars": max_chars}
        return offer.result_content(result, **kwargs)

    def _live(self, server) -> _Connection:
        """The connection, checked with a round trip first: a server that died while idle is restarted now,
        before the call, so the call itself is not lost."""
        conn = self.connection(server)
        try:
            self._run(self._ping(conn)).result(timeout=min(10.0, float(server.connect_timeout)))
            return conn
        except Exception as exc:
            self.close(server.id)
            self._failed(server, f"found stopped ({_describe(exc)}); restarting it")
            return self.connection(server)

    @staticmethod
    async def _ping(conn: _Connection) -> None:
        if conn.client is None:
            raise CallFailed("the connection closed")
        # A listing, not a ping: the 2026-07-28 protocol has no ping. One round trip on stdio.
        await conn.client.list_tools(cache_mode="bypass")

    async def _call(self, conn: _Connection, tool: str, arguments: dict):
        client = conn.client
        if client is None:
            return CallFailed("the connection closed")
        try:
            return await client.call_tool(tool, arguments, read_timeout_seconds=conn.timeout)
        except Exception as exc:  # returned, not raised: the caller tells a timeout from a crash
            return exc

    def _call_failed(self, server, conn: _Connection, tool: str, exc: BaseException, latency: float) -> str:
        from mcp import MCPError  # the SDK (~1.2 s to import) loads on first use only
        from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        if isinstance(exc, MCPError) and getattr(exc, "code", None) == REQUEST_TIMEOUT:
            self._record(server.id, last_latency_ms=latency, last_error=f"{tool}: timed out")
            return (f"Error: the call to {tool} on MCP server '{server.name}' timed out after {conn.timeout:g} s; "
                    "the server may still be working on it")
        if isinstance(exc, CallAbandoned):
            self._record(server.id, last_latency_ms=latency, last_error=f"{tool}: {exc}")
            return f"Error: {exc}"
        closed = isinstance(exc, MCPError) and getattr(exc, "code", None) == CONNECTION_CLOSED
        if conn.alive and isinstance(exc, MCPError) and not closed:  # the server answered with a protocol error
            self._record(server.id, last_latency_ms=latency, last_error=f"{tool}: {_describe(exc)}")
            return f"Error: MCP server '{server.name}' refused the call to {tool}: {_describe(exc)}"
        # The connection broke: the server died or closed. It is restarted on its next use.
        self.close(server.id)
        reason = _describe(exc if not isinstance(exc, CallFailed) else conn.error or exc)
        self._failed(server, f"{tool}: the server stopped during the call ({reason})")
        return (f"Error: MCP server '{server.name}' stopped during the call to {tool} ({reason}); "
                "it is restarted on its next use")

    # --- state on the row ----------------------------------------------------------------------

    @staticmethod
    def _record(server_id: int, **fields) -> None:
        MCPServer.objects.filter(id=server_id).update(checked_at=timezone.now(), **fields)

    @staticmethod
    def _failed(server, reason: str) -> None:
        MCPServer.objects.filter(id=server.id).update(
            failures=F("failures") + 1, last_error=reason, checked_at=timezone.now(),
            state_generation=server.generation)
        MCPServer.objects.filter(id=server.id, failures__gte=MAX_FAILURES).update(state="down")
        MCPServer.objects.filter(id=server.id, failures__lt=MAX_FAILURES).update(state="failing")
        log.warning("MCP server %s: %s", server.name, reason)

    # --- the worker's watcher ------------------------------------------------------------------

    def refresh(self) -> None:
        """Connect to every enabled server not yet tried at its current generation (a worker that
        starts, an admin's change or Reload), and close the connections of servers switched off
        or removed."""
        servers = {s.id: s for s in MCPServer.objects.all()}
        for server_id in list(self._connections):
            server = servers.get(server_id)
            if server is None or not server.enabled:
                self.close(server_id)
        for server in servers.values():
            fresh = server.state == "unknown"  # a row no worker has reported on yet
            if not server.enabled or (self._tried.get(server.id) == signature(server) and not fresh):
                continue
            if server.state == "down" and server.state_generation == server.generation:
                continue  # until an admin reloads it
            self._tried[server.id] = signature(server)
            try:
                conn = self.connection(server)
            except CallFailed:
                continue
            if fresh:  # connected earlier under the same signature: say so on the row
                self._record(server.id, state="connected", tools=conn.tools, failures=0, last_error="",
                             state_generation=server.generation)


CLIENTS = MCPClients()


def watch_forever(stop: threading.Event, interval: float = WATCH_SECONDS) -> None:
    """The worker's thread: `CLIENTS.refresh()` now and every ``interval`` seconds."""
    while not stop.is_set():
        try:
            close_old_connections()
            CLIENTS.refresh()
        except Exception:
            log.exception("the MCP watcher failed; it tries again")
        stop.wait(interval)
