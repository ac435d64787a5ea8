"""The independent recall exam's data (bench/exam_independent/, written without sight of the anchor
extractor or the search) keeps every rule its checker states: counts, each answer in its planting
item and nowhere else, questions without the answer, other-words questions sharing no content word
with the planting line, every kind of fact present."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = Path(__file__).resolve().parents[2] / "bench" / "exam_independent" / "check.py"


def test_the_exam_data_passes_its_own_checker():
    run = subprocess.run([sys.executable, str(CHECK)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "OK: all mechanical checks passed" in run.stdout
