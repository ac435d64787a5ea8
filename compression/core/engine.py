"""Public entry point of the context engine: the contract, its results and engine selection.

Import from here: ``ContextEngine``, ``CompressionResult``, ``CompressionPreview``,
``register_context_engine``, ``get_context_engine``, ``reset_registry``. The definitions live in
``base`` (contract) and ``registry`` (selection) so the built-in compressor can depend on the
contract without a cycle.
"""

from __future__ import annotations

from .base import (
    PHASE_ASSEMBLING,
    PHASE_PRUNING,
    PHASE_SUMMARISING,
    CompressionPreview,
    CompressionResult,
    ContextEngine,
    ProgressCallback,
    Status,
    chunk_phase,
    parse_chunk_phase,
)
from .registry import (
    BUILTIN_ENGINE,
    DEFAULT_PLUGIN_DIR,
    get_context_engine,
    get_plugin_dir,
    register_context_engine,
    registered_engines,
    reset_registry,
    set_plugin_dir,
)

__all__ = [
    "BUILTIN_ENGINE",
    "DEFAULT_PLUGIN_DIR",
    "PHASE_ASSEMBLING",
    "PHASE_PRUNING",
    "PHASE_SUMMARISING",
    "CompressionPreview",
    "CompressionResult",
    "ContextEngine",
    "ProgressCallback",
    "Status",
    "chunk_phase",
    "get_context_engine",
    "get_plugin_dir",
    "parse_chunk_phase",
    "register_context_engine",
    "registered_engines",
    "reset_registry",
    "set_plugin_dir",
]
