"""`python -m simulator --port N`: serve the simulator on loopback until interrupted.

Configuration also comes from HERMES_SIM_* variables (see `Simulator.from_env`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from simulator.cache import MODES
from simulator.engine import Simulator
from simulator.faults import parse_fault_spec
from simulator.server import start_simulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__)
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port (default 8765)")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument("--fault", help="server-wide fault, e.g. 529 or 429=20:3 (name[=arg][:count])")
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.add_argument("--cache-mode", choices=MODES,
                        help="how the unstated caching points are read (default documented; HERMES_SIM_CACHE)")
    args = parser.parse_args(argv)

    overrides = {}
    if args.cache_mode:
        overrides["cache_mode"] = args.cache_mode
    if args.fault:
        fault, count = parse_fault_spec(args.fault)
        overrides["faults"] = [(fault, count)] if fault else []
    try:
        simulator = Simulator.from_env(**overrides)
    except ValueError as exc:  # a bad HERMES_SIM_* value: one line naming it, no traceback
        print(f"simulator: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    # Before the "listening" line: a caller may send SIGTERM as soon as it has read it.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = start_simulator(args.port, args.host, simulator=simulator, verbose=args.verbose)
    print(f"Hermes model simulator listening on {server.base_url}", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
