"""`make run`'s launcher on embedded defaults: everything comes up, the printed admin login works,
/healthz is green, and Ctrl-C leaves no process behind; a second run needs no cleanup."""
from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

import pytest

from tests.integration.helpers import launcher_env, launcher_start, launcher_stop_with_ctrl_c, wait_healthz

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stack, on the embedded defaults


def login(port: int, username: str, password: str) -> str:
    import http.cookiejar

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{port}"
    html = opener.open(base + "/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    data = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token}).encode()
    request = urllib.request.Request(base + "/accounts/login/", data=data, headers={"Referer": base + "/accounts/login/"})
    return opener.open(request).geturl()


def test_the_run_command_starts_everything_and_ctrl_c_stops_it(tmp_path):
    env = launcher_env(tmp_path)
    web, sim = int(env["HERMES_PORT"]), int(env["HERMES_SIMULATOR_PORT"])
    log = tmp_path / "run.log"

    proc = launcher_start(env, log)
    try:
        health = wait_healthz(web, proc)
        assert health == {"status": "ok"}, health  # anonymous: no hosts, no parts
        output = log.read_text()
        password = re.search(r"username: admin\s+password: (\S+)", output).group(1)
        assert login(web, "admin", password).endswith("/")
        with urllib.request.urlopen(f"http://127.0.0.1:{sim}/_sim/health", timeout=5) as response:
            assert json.loads(response.read())["ok"] is True
    finally:
        leftovers = launcher_stop_with_ctrl_c(proc)
    assert leftovers == set(), f"processes left behind: {leftovers}\n{log.read_text()[-2000:]}"

    # A second run on the same data folder works without cleanup and prints no new password.
    proc = launcher_start(env, log)
    try:
        assert wait_healthz(web, proc)["status"] == "ok"
    finally:
        leftovers = launcher_stop_with_ctrl_c(proc)
    assert leftovers == set()
    assert len(re.findall(r"password: ", log.read_text())) == 1
    assert "to set a new one: python manage.py changepassword admin" in log.read_text()
