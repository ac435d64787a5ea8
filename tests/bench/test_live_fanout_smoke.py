"""The live fan-out benchmark runs end to end at tiny sizes: its own stack (Redis, a worker, the
product's Daphne and the floor's), every event delivered on every path, the figures printed."""
from __future__ import annotations

import pytest

from bench import live_fanout

pytestmark = pytest.mark.integration


def test_the_benchmark_delivers_every_event_and_prints_the_figures(capsys):
    result = live_fanout.main(["--sizes", "1,3", "--rounds", "2,2"])
    out = capsys.readouterr().out

    rows = {(row["n"], row["path"]): row for row in result["rows"]}
    assert set(rows) == {(n, path) for n in (1, 3) for path in live_fanout.PATHS}
    for row in rows.values():
        assert row["sent"] == row["n"] * 2
        assert row["received"] == row["sent"], row
        assert row["p50_ms"] is not None and row["p99_ms"] is not None
    assert isinstance(result["redis_before"], int) and isinstance(result["redis_after"], int)
    assert result["foreign"] == 0 and result["refused_other_user"] is True

    for path in live_fanout.PATHS:
        assert path in out
    assert "p50 ms" in out and "p99 ms" in out and "delivered" in out
    assert f"connected_clients before {result['redis_before']}, after {result['redis_after']}" in out
    assert "every event delivered" in out
