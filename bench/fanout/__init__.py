"""The parts of ``bench/live_fanout.py``: its environment, publisher, sockets, passes and report."""
