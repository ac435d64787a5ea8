"""A real simulator on a free loopback port, shared by the module's tests and reset between them.

The clock is manual (time stands still unless a test advances it), so TTL tests are exact.
"""

from __future__ import annotations

import anthropic
import pytest

from simulator import SimClock, start_simulator

SIM_KEY = "sk-test-alice"
MODEL = "sim-claude-200k"


@pytest.fixture(scope="session")
def sim_server():
    server = start_simulator(clock=SimClock(start=1_000_000.0), retry_after_ms=5, env={})
    yield server
    server.stop()


@pytest.fixture
def server(sim_server):
    sim_server.sim.reset()
    yield sim_server
    sim_server.sim.reset()


@pytest.fixture
def client(server):
    return anthropic.Anthropic(api_key=SIM_KEY, base_url=server.base_url)


def call_control(server, path: str, payload: dict | None = None) -> dict:
    """GET (no payload) or POST a JSON payload to a `/_sim/...` control endpoint."""
    import json
    import urllib.request

    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        server.base_url + path, data=data, method="GET" if payload is None else "POST",
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def control(server):
    return lambda path, payload=None: call_control(server, path, payload)
