"""The parts of ``bench/cache_economics.py``: its workloads, its accounting, the replay and the table."""
