"""bench/cache_probe.py: without a key it sends nothing and exits 0; its two sequences, run through
the SDK against the simulator in each mode (the waits move the simulator's clock), reach the
conclusion each reading predicts."""
from __future__ import annotations

import anthropic
import pytest

from bench import cache_probe
from simulator import SimClock, start_simulator


def test_without_a_key_it_says_so_and_exits_0(capsys):
    assert cache_probe.main([], env={}) == 0
    assert "ANTHROPIC_API_KEY is not set, so nothing was sent" in capsys.readouterr().out


@pytest.mark.parametrize("mode, repin", [
    ("documented", "supports HERMES_SIM_CACHE=documented"),
    ("optimistic", "supports HERMES_SIM_CACHE=optimistic"),
])
def test_its_sequences_tell_the_two_readings_apart(mode, repin):
    server = start_simulator(clock=SimClock(start=1_000_000.0), env={}, cache_mode=mode)
    try:
        client = anthropic.Anthropic(api_key="sk-probe", base_url=server.base_url)
        lines = []
        results = cache_probe.run_probe(client, "claude-haiku-4-5", sleep=server.sim.clock.advance, out=lines.append)
    finally:
        server.stop()
    first, second, third = results["repin"]
    assert first.write_5m > 4096 and (second.read, second.write_5m, second.write_1h) == (first.write_5m, 0, 0)
    verdict = cache_probe.conclusions(results)
    assert any(repin in line for line in verdict)
    # A 1h entry written for the reply alone covers the whole prefix under both readings.
    assert any("rolling_1h's premise holds" in line for line in verdict)
    assert len(lines) == 7 and lines[0].startswith("model claude-haiku-4-5")
