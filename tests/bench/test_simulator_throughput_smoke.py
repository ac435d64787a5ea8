"""The simulator throughput benchmark runs end to end in its quick mode: both servers started as
processes, every request of every cell answered in full by both, the table printed with figures
in each row, and the verdict line printed. Whether the target is met is the benchmark's report,
not a test."""
from __future__ import annotations

import re

import pytest

from bench import simulator_throughput as bench

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # the simulator alone: no database

NUMBER = r"-?\d+\.\d+"


def test_the_quick_run_answers_every_request_and_prints_the_table(capsys):
    result = bench.main(["--quick"])
    out = capsys.readouterr().out

    cells = {(cell["client"], cell["mode"], cell["clients"]): cell for cell in result["cells"]}
    expected = {("httpx", mode, n) for mode in bench.MODES for n in bench.QUICK["clients"]}
    expected |= {("sdk", mode, 1) for mode in bench.MODES}
    assert set(cells) == expected
    for key, cell in cells.items():
        for server in bench.SERVERS:
            side = cell[server]
            assert side["errors"] == 0, (key, server, side["first_error"])
            assert side["requests"] > 0, (key, server)
            assert side["p50_ms"] <= side["p99_ms"], (key, server)
        assert cell["added_p50_ms"] == pytest.approx(cell["simulator"]["p50_ms"] - cell["floor"]["p50_ms"])

    # The floor answers the same shape at about the simulator's size, streaming and not.
    for mode in bench.MODES:
        sim, floor = result["response_bytes"]["simulator"][mode], result["response_bytes"]["floor"][mode]
        assert 0.8 < floor / sim < 1.25, (mode, sim, floor)

    for client, mode, n in expected:
        # client, mode, clients, then req/s p50 p99 cpu for each server, then the added p50
        row = rf"^{client}\s+{mode}\s+{n}\s+" + r"\s+".join([NUMBER] * 9) + r"\s*$"
        assert re.search(row, out, re.MULTILINE), f"no row for {client} {mode} {n}:\n{out}"
    assert "simulator" in out and "floor" in out and "added p50 ms" in out
    assert re.search(r"^(PASS|FAIL)  simulator adds < 5 ms p50 per request \(every httpx cell\): "
                     rf"worst added p50 {NUMBER} ms", out, re.MULTILINE), out
    assert isinstance(result["target_met"], bool)
