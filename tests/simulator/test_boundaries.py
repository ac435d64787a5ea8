"""The simulator is a leaf: it imports `llm` and `compression.core`, nothing else of the project and
no SDK, and `llm/` holds none of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT_PACKAGES = ("compression", "hermes_web", "llm", "plugins", "sessions", "simulator", "staff")


def test_the_simulator_imports_only_llm_and_compression_core_of_the_project():
    code = (
        "import sys, pkgutil, importlib, simulator\n"
        "for m in pkgutil.iter_modules(simulator.__path__):\n"
        "    importlib.import_module('simulator.' + m.name)\n"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    project = {m for m in loaded if m.split(".")[0] in PROJECT_PACKAGES}
    outside = sorted(
        m for m in project
        if not m.startswith(("simulator", "llm", "compression.core")) and m != "compression"
    )
    assert outside == []
    assert not [m for m in loaded if m.split(".")[0] in ("anthropic", "openai", "httpx", "django")]


def test_llm_holds_no_simulator_code():
    assert not (ROOT / "llm" / "simulator").exists()
    assert not (ROOT / "llm" / "validation.py").exists()
    assert not (ROOT / "llm" / "blocks.py").exists()
    sources = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "llm").glob("*.py"))
    assert "import simulator" not in sources and "from simulator" not in sources
