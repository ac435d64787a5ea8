"""The offline simulator: an Anthropic-Messages-compatible HTTP server on loopback.

    from simulator import start_simulator
    with start_simulator() as server:            # a free port
        client = anthropic.Anthropic(api_key="sk-sim", base_url=server.base_url)

Command line: `python -m simulator --port 8765`. Prompt caching follows Anthropic's documented rules;
`HERMES_SIM_CACHE` / `--cache-mode` chooses how the points they leave open are read (`documented`,
the default, or `optimistic`; docs/simulator.md).
"""

from simulator.clock import SimClock
from simulator.engine import SimError, Simulator
from simulator.faults import FAULT_HEADER, FAULT_NAMES, Fault, parse_fault
from simulator.server import SimulatorServer, start_simulator

__all__ = [
    "FAULT_HEADER",
    "FAULT_NAMES",
    "Fault",
    "SimClock",
    "SimError",
    "Simulator",
    "SimulatorServer",
    "parse_fault",
    "start_simulator",
]
