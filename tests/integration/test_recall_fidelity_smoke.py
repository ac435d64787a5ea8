"""The fidelity benchmark runs end to end in its quick mode: one small conversation through the real
agent loop with each engine, every fact scored, the exam's code driven by the simulator, the
recall tools timed on the test run's database and on a throwaway PostgreSQL one (or the reason not), the table printed. Whether
the targets are met is the benchmark's report, not a test."""
from __future__ import annotations

import pytest
from django.db import connection

from bench import fidelity

# The SQLite pass measures the recall tools on SQLite and on a throwaway PostgreSQL database both,
# so the PostgreSQL pass would only repeat it.
pytestmark = [pytest.mark.integration, pytest.mark.one_database]


def test_the_quick_run_scores_every_fact_and_prints_the_table(live, capsys):
    # `live`: the benchmark's turns are handed to Celery (eager here) through the same enqueue as
    # the product's, which first checks that the broker (the stack's Redis) answers.
    result = fidelity.main(["--quick", "--jobs", "1", "--grader", "simulator", "--latency-messages", "400"])
    out = capsys.readouterr().out

    runs = {r.engine: r for r in result["runs"]}
    assert set(runs) == set(fidelity.ENGINES)
    for run in runs.values():
        assert run.failed_turns == 0 and run.compactions >= 1
        assert len(run.closed) == len(run.opened) == run.facts == fidelity.QUICK["facts"]
        assert 0 < run.context_tokens < run.uncompacted_tokens
        assert run.exam["asked"] == run.facts and run.exam["input_tokens"] > 0
    # Open-book adds the search to closed-book for lcm; the compressor has no tools to add.
    lcm, compressor = runs["lcm"], runs["compressor"]
    assert all(o or not c for c, o in zip(lcm.closed, lcm.opened))
    assert compressor.opened == compressor.closed and compressor.search_ms == []
    assert len(lcm.search_ms) == lcm.facts

    # The first row is measured on the test run's own database (SQLite, or DATABASE_URL's).
    own = result["latency"][0]
    expected = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    assert own["backend"] == expected and own["messages"] == 400 and own["search_p50"] > 0
    assert result["latency"][1]["backend"] == "PostgreSQL"
    assert len(result["latency"]) == 2  # PostgreSQL: measured, or the reason it was not
    for line in ("Fidelity after compaction", "coding       compressor", "coding       lcm", "Recall tools at 400",
                 "Target lcm open-book"):
        assert line in out
