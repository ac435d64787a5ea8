"""The parts of ``bench/simulator_throughput.py``: the cells' figures, the clients and the report."""
