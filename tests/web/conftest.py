from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _in_memory_channel_layer(settings):
    """The fast tier needs no services: websockets and broadcasts use the in-memory layer."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


@pytest.fixture(scope="session")
def sim():
    """One real simulator over HTTP for the fast tier's agent-loop tests (reset for each test)."""
    from simulator import start_simulator

    server = start_simulator()
    yield server
    server.stop()


@pytest.fixture
def simulator_wired(sim, settings):
    """The simulator route points at `sim`, freshly reset."""
    settings.HERMES_SIMULATOR_URL = sim.base_url
    sim.sim.reset()
    return sim


@pytest.fixture
def eager_simulator(simulator_wired):
    """`simulator_wired`, with Celery tasks run in the calling thread."""
    from hermes_web.celery import app

    app.conf.task_always_eager = True
    yield simulator_wired
    app.conf.task_always_eager = False


@pytest.fixture
def signed_in(client, alice):
    """The test client logged in as alice."""
    client.force_login(alice)
    return client
