"""`python -m simulator` starts a server with one command and stops on SIGTERM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_serves_from_the_command_line_and_stops_on_sigterm():
    env = dict(os.environ, HERMES_SIM_MODELS='[{"name": "sim-claude-cli", "context_window": 70000}]')
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        base_url = line.split("listening on ", 1)[1].strip()
        with urllib.request.urlopen(base_url + "/_sim/health", timeout=10) as response:
            health = json.loads(response.read())
        assert health["ok"] and "sim-claude-cli" in health["models"]
        assert health["cache_mode"] == "documented"  # the default reading of the caching docs
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_it_takes_the_cache_mode_from_the_command_line():
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--port", "0", "--cache-mode", "optimistic"],
        cwd=ROOT, env=dict(os.environ), stdout=subprocess.PIPE, text=True,
    )
    try:
        base_url = proc.stdout.readline().split("listening on ", 1)[1].strip()
        with urllib.request.urlopen(base_url + "/_sim/health", timeout=10) as response:
            assert json.loads(response.read())["cache_mode"] == "optimistic"
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_bad_cache_mode_stops_it_with_one_line_naming_the_variable():
    out = subprocess.run([sys.executable, "-m", "simulator", "--port", "0"], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, HERMES_SIM_CACHE="generous"), timeout=60)
    assert out.returncode == 2
    assert out.stderr.strip() == ("simulator: HERMES_SIM_CACHE: cache mode must be one of documented, optimistic "
                                  "(got 'generous')")
