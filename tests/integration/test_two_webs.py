"""Two web processes behind a proxy, two workers, one Redis: the benchmark's own stack at a few
sockets per web process. Every event a worker publishes (the stamped deltas of both workers, and
real chat turns posted to either web process) reaches every socket, whichever process holds it.
No latency assertion: the figures are the benchmark's report, not a test."""
from __future__ import annotations

import pytest

from bench import two_webs

pytestmark = [pytest.mark.integration, pytest.mark.one_database]  # its own stack, on the embedded defaults


def test_every_event_reaches_every_socket_on_both_web_processes(capsys):
    result = two_webs.main(["--sockets", "8", "--conversations", "2", "--rounds", "3", "--turns", "1",
                            "--warm", "0"])
    out = capsys.readouterr().out

    watchers = result["watchers"]
    assert len(watchers) == 8 and result["unknown"] == 0
    for conversation in {w.conversation for w in watchers}:  # each one watched from both processes
        assert {w.web for w in watchers if w.conversation == conversation} == set(two_webs.WEBS)
    for w in watchers:
        # Both workers' stamped deltas, every round, on every socket.
        assert result["expected"][w.index] <= w.stamped.keys(), (w.web, w.index)
        assert len(result["expected"][w.index]) == 2 * 3
        assert w.done >= 1 and w.closed_by_server is None
        assert w.titles == 1  # the first reply's title, a late event, reached every socket
    assert result["every_event_delivered"]
    assert {web: d["missing"] + d["lost"] for web, d in result["delivery"].items()} == {"web1": 0, "web2": 0}
    assert all(d["sockets"] == 4 for d in result["delivery"].values())
    assert sum(result["worker_turns"].values()) == 2  # one turn in each conversation
    for report in result["stream_reports"].values():  # the stamped stream ran on each worker
        assert report["published"] == 2 * 3

    # Each turn was posted to one web process; its deltas reached sockets on both.
    rows = result["turn_rows"]
    assert {(r["web"] == r["socket_web"]) for r in rows if r["first_delta_ms"] is not None} == {True, False}
    assert "every event reached every socket on both web processes" in out
    for label in ("delta -> socket on web1", "submit -> first delta, the other web process",
                  "connect -> first state on web2", "p50 ms", "p99 ms"):
        assert label in out
