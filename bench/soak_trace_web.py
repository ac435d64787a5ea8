"""Daphne's application under ``bench/soak.py --tracemalloc``: the snapshot thread starts before the
product's ASGI application is built (bench/soak_trace.py); the application is
``hermes_web.asgi.application`` itself."""
from __future__ import annotations

from bench.soak_trace import start_thread

start_thread("web")

from hermes_web.asgi import application  # noqa: E402

__all__ = ["application"]
