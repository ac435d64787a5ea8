"""`python -m llm.simulator` starts a server with one command and stops on SIGTERM."""

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
        [sys.executable, "-m", "llm.simulator", "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line
        base_url = line.split("listening on ", 1)[1].strip()
        with urllib.request.urlopen(base_url + "/_sim/health", timeout=10) as response:
            health = json.loads(response.read())
        assert health["ok"] and "sim-claude-cli" in health["models"]
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
