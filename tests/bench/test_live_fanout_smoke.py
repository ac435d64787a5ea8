"""The live fan-out benchmark runs end to end at tiny sizes: its own stack (Redis, a worker with
the benchmark's stream task, the product's Daphne and the floor's), every event delivered on every
path (the worker stream included, and the repeat pass of the largest size), the figures printed.
No latency assertion: that is the benchmark's report, not a test."""
from __future__ import annotations

import pytest

from bench import live_fanout

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stack, on the embedded defaults


def test_the_benchmark_delivers_every_event_and_prints_the_figures(capsys):
    result = live_fanout.main(["--sizes", "1,3", "--rounds", "2,2"])
    out = capsys.readouterr().out

    rows = {(row["n"], row["path"], row["repeat"]): row for row in result["rows"]}
    expected = {(n, path, False) for n in (1, 3) for path in live_fanout.PATHS}
    expected |= {(3, path, True) for path in live_fanout.PATHS}  # the largest size, run again
    assert set(rows) == expected
    for row in rows.values():
        assert row["sent"] == row["n"] * 2
        assert row["received"] == row["sent"], row
        assert row["p50_ms"] is not None and row["p99_ms"] is not None
        relay = "floor" if row["path"] == live_fanout.FLOOR else "web"
        assert row["cpu_ms"][relay] >= 0 and set(row["cpu_ms"]) == {"web", "floor", "worker"}, row
    for n, repeat in ((1, False), (3, False), (3, True)):
        worker = rows[(n, live_fanout.STREAM, repeat)]["worker"]  # the task ran in the worker and reported
        assert worker["published"] == n * 2 and worker["finished"] >= worker["started"]
    for key in ("redis_before", "redis_after", "redis_first_pass", "redis_repeat"):
        assert isinstance(result[key], int), key
    assert result["redis_largest"] == 3
    assert result["foreign"] == 0 and result["refused_other_user"] is True

    for path in live_fanout.PATHS:
        assert path in out
    assert "p50 ms" in out and "p99 ms" in out and "delivered" in out
    assert (f"connected_clients after N=3 first pass {result['redis_first_pass']}, "
            f"after its repeat {result['redis_repeat']}") in out
    assert "rule: after the repeat <= after the first pass" in out
    assert f"connected_clients before {result['redis_before']}" in out
    assert f"p99 < 100 ms at N=3 ({live_fanout.STREAM})" in out
    assert "every event delivered: all" in out
    assert "Daphne CPU/event" in out
    assert "connect p50 within 3x the floor's: " in out
