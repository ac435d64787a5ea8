"""The proxy in front of the two web processes of ``bench/two_webs.py``: Debian's haproxy or nginx
when one is installed, else a small asyncio TCP proxy (this module, run as its own process).

No sticky sessions are needed, for pages or for websockets: any web process can serve any
conversation. A socket joins its conversation's group, which lives in Redis (Channels' Redis
layer), so an event published by any worker or web process reaches every member whichever web
process holds it; nothing about a socket is kept in a web process that another one would need,
and a page whose socket drops re-renders everything from the database when it reconnects, on
whichever process the proxy picks then. The Django session is in the database too. So the proxy
only has to pass the websocket upgrade through and balance by connection: the fallback here picks
the next web process for each new TCP connection (round robin) and copies bytes both ways until
either side closes, which carries HTTP and websockets alike.

Run alone: .venv/bin/python -m bench.two_webs_proxy --port 8080 --backend 127.0.0.1:8001
           --backend 127.0.0.1:8002
"""
from __future__ import annotations

import argparse
import asyncio
import itertools
import shutil
import subprocess
import sys
from pathlib import Path

READY = "two-webs proxy listening"
CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            writer.close()


async def serve(port: int, backends: list[tuple[str, int]]) -> None:
    turn = itertools.cycle(backends)

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        host, backend_port = next(turn)
        try:
            backend_reader, backend_writer = await asyncio.open_connection(host, backend_port)
        except OSError:
            client_writer.close()
            return
        try:
            await asyncio.gather(_pipe(client_reader, backend_writer), _pipe(backend_reader, client_writer))
        finally:
            for writer in (client_writer, backend_writer):
                writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print(f"{READY} on {port}", flush=True)
    async with server:
        await server.serve_forever()


def haproxy_config(port: int, backends: list[tuple[str, int]]) -> str:
    """HTTP mode (websocket upgrades pass through as such), round robin, no stickiness; long
    tunnel timeouts so an idle websocket is not cut. One thread: connections are then handed out
    in the order they arrive, which the benchmark's ordering of its sockets counts on."""
    servers = "\n".join(f"    server web{i + 1} {h}:{p}" for i, (h, p) in enumerate(backends))
    return f"""global
    maxconn 8000
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
frontend hermes
    bind 127.0.0.1:{port}
    default_backend webs
backend webs
    balance roundrobin
{servers}
"""


def nginx_config(port: int, backends: list[tuple[str, int]], base: Path) -> str:
    servers = "\n".join(f"        server {h}:{p};" for h, p in backends)
    return f"""daemon off;
worker_processes 1;
pid {base}/nginx.pid;
error_log {base}/nginx-error.log;
events {{ worker_connections 20000; }}
http {{
    access_log off;
    client_body_temp_path {base}/body;
    proxy_temp_path {base}/proxy;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    upstream webs {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://webs;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_read_timeout 1h;
        }}
    }}
}}
"""


def install_haproxy(log=print) -> bool:
    """``apt-get install -y haproxy`` (root with network only); False when it could not."""
    try:
        done = subprocess.run(["apt-get", "install", "-y", "-qq", "haproxy"], capture_output=True, text=True,
                              timeout=300, env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"haproxy not installed: {exc!r}")
        return False
    if done.returncode != 0:
        log(f"haproxy not installed: apt-get exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return shutil.which("haproxy") is not None


def choose(kind: str) -> str:
    """``auto``: haproxy, else nginx, else the asyncio fallback."""
    if kind != "auto":
        return kind
    for name in ("haproxy", "nginx"):
        if shutil.which(name):
            return name
    return "asyncio"


def start(stack, kind: str, port: int, backends: list[tuple[str, int]], base: Path) -> str:
    """Start the proxy as a process of ``stack`` (``tests.stack.Stack``); returns what runs."""
    from tests.stack import wait_for_port

    kind = choose(kind)
    base.mkdir(parents=True, exist_ok=True)
    if kind == "haproxy":
        config = base / "haproxy.cfg"
        config.write_text(haproxy_config(port, backends))
        proc = stack._spawn("proxy", [shutil.which("haproxy"), "-db", "-f", str(config)])
    elif kind == "nginx":
        config = base / "nginx.conf"
        config.write_text(nginx_config(port, backends, base))
        proc = stack._spawn("proxy", [shutil.which("nginx"), "-c", str(config), "-p", str(base)])
    elif kind == "asyncio":
        proc = stack._spawn("proxy", [sys.executable, "-m", "bench.two_webs_proxy", "--port", str(port),
                                      *[arg for h, p in backends for arg in ("--backend", f"{h}:{p}")]])
    else:
        raise ValueError(f"unknown proxy {kind!r}")
    wait_for_port(port, proc, what=f"proxy ({kind})")
    return kind


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--backend", action="append", required=True, help="host:port, once per web process")
    args = parser.parse_args(argv)
    backends = [(b.rsplit(":", 1)[0], int(b.rsplit(":", 1)[1])) for b in args.backend]
    try:
        asyncio.run(serve(args.port, backends))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
