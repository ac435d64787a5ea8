"""The soak benchmark runs end to end in its quick mode (its own stack, turns on every conversation,
the RSS of each process sampled and the growth figures printed), and the worker keeps no query
log between tasks, the growth the soak found. No memory threshold: figures are the benchmark's
report, not a test."""
from __future__ import annotations

import pytest

from bench import soak


@pytest.mark.integration
@pytest.mark.one_database  # its own stack, on the embedded defaults
def test_the_quick_soak_runs_turns_and_prints_each_process_memory(capsys):
    result = soak.main(["--quick", "--minutes", "0.25", "--sample", "5"])
    out = capsys.readouterr().out

    counters = result["counters"]
    assert counters.done > 0
    assert (counters.failed, counters.timeouts, counters.post_errors, counters.dropped_sockets) == (0, 0, 0, 0)
    samples = result["samples"]
    assert len(samples) >= 3  # the start, at least one interval, the end
    for sample in samples:
        assert all(sample.rss_kb[name] for name in soak.PROCESSES), sample
    assert samples[-1].turns == counters.done
    for name in ("worker", "web"):
        assert result["growth"][name]["kb_per_turn"] is not None
        assert f"{name} RSS " in out and "a turn over its second half" in out
    assert "worker MB" in out and "web MB" in out and "KB/turn" in out


def test_soak_refuses_fewer_sockets_than_conversations():
    with pytest.raises(SystemExit):
        soak.main(["--sockets", "2", "--conversations", "3"])


@pytest.mark.django_db
def test_a_task_leaves_no_query_log_behind_in_the_worker_thread(settings):
    """With DEBUG on, Django logs every query of a connection and clears the log when a request
    starts; a worker serves no requests, so the task_postrun handler clears it after each task."""
    from django.db import connection

    from hermes_web.celery import app
    from sessions.tasks import stale_sweep

    settings.DEBUG = True
    app.conf.task_always_eager = True
    connection.queries_log.clear()
    try:
        stale_sweep.delay()  # runs its queries in this thread, as a pool thread runs a task
    finally:
        app.conf.task_always_eager = False
    assert len(connection.queries_log) == 0
