"""The parts of ``bench/cache_economics.py``: its workloads, its accounting, the replay, the headline
report and the detail table."""
