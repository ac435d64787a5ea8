"""The pure modules (shared with the engine's property tests) import no SDK and no Django."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_imports_the_pure_modules_without_sdks_or_django():
    code = (
        "import sys, llm.convert, llm.usage, llm.models, llm.errors, llm.base; "
        "print(sorted(m for m in ('anthropic', 'openai', 'httpx', 'httpx2', 'django') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_llm_does_not_import_the_simulator():
    code = (
        "import sys, llm, llm.convert, llm.usage, llm.models, llm.errors, llm.base, llm.providers, "
        "llm.anthropic_provider, llm.openai_provider; print('simulator' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
