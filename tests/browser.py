"""Headless Debian Chromium driven by Playwright (browser downloads do not work here)."""
from __future__ import annotations

import contextlib
import shutil

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise RuntimeError("Debian's chromium is required for browser tests: `make test` installs it")
    return path


@contextlib.contextmanager
def browser():
    import os

    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still plain synchronous code.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
            # Playwright runs the block in its own context, so the ORM opened a connection there;
            # close it here or PostgreSQL cannot drop the test database afterwards.
            from django.db import connections

            connections.close_all()
