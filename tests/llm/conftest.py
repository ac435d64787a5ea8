"""The provider tests run against the same real simulator fixtures as the simulator's own tests."""

from tests.simulator.conftest import MODEL, SIM_KEY, client, control, server, sim_server  # noqa: F401
