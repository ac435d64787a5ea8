"""The offline simulator: an Anthropic-Messages-compatible HTTP server on loopback.

    from llm.simulator import start_simulator
    with start_simulator() as server:            # a free port
        client = anthropic.Anthropic(api_key="sk-sim", base_url=server.base_url)

Command line: `python -m llm.simulator --port 8765`.
"""

from llm.simulator.clock import SimClock
from llm.simulator.engine import SimError, Simulator
from llm.simulator.faults import FAULT_HEADER, FAULT_NAMES, Fault, parse_fault
from llm.simulator.server import SimulatorServer, start_simulator

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
