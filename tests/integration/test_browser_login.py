from __future__ import annotations

import pytest

from tests.browser import browser
from tests.integration.conftest import ARTIFACTS

pytestmark = [pytest.mark.integration, pytest.mark.browser, pytest.mark.one_database]


def test_it_logs_in_through_the_browser_and_reaches_home(live, alice):
    base = f"http://127.0.0.1:{live.web_port}"
    with browser() as b:
        page = b.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(base + "/")
        assert "/accounts/login/" in page.url
        page.fill("#id_username", "alice")
        page.fill("#id_password", "wrong")
        page.click("button[type=submit]")
        assert page.locator("[role=alert]").is_visible()
        page.fill("#id_username", "alice")
        page.fill("#id_password", "alice-password-1")
        page.click("button[type=submit]")
        page.wait_for_selector("#new-conversation")
        assert page.evaluate("typeof htmx") == "object"  # static files served by Daphne
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "home.png"))
        assert errors == []
