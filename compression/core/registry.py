"""Engine selection by name (SPEC §2): plugin folder → registered engine → built-in with a warning.

Guarantees:
- ``get_context_engine(name, **kwargs)`` always returns a NEW engine instance: classes and factories
  are called with the keyword arguments their signature accepts; a registered instance is deep-copied,
  so no two sessions share mutable engine state.
- ``"compressor"`` (and an empty name) is always the built-in compressor, ``"lcm"`` always the
  built-in lossless engine (``compression.core.lcm``); no plugin or registration shadows either.
  A plugin is only loaded when its name is asked for; a missing or broken one, or a registered
  engine that cannot be built (a factory that raises, an instance that cannot be deep-copied),
  logs a warning naming it and falls back to the built-in: selecting an engine never raises.
- The plugin folder root is configurable (``set_plugin_dir`` or ``plugin_dir=``); default
  ``<repo>/plugins/context_engine/``. Plugin names are plain identifiers, never paths.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from .base import ContextEngine
from .compressor import ContextCompressor
from .lcm import LcmEngine

log = logging.getLogger(__name__)

BUILTIN_ENGINE = "compressor"
LCM_ENGINE = "lcm"
BUILTIN_ENGINES = (BUILTIN_ENGINE, LCM_ENGINE)
DEFAULT_PLUGIN_DIR = Path(__file__).resolve().parents[2] / "plugins" / "context_engine"
_PLUGIN_PACKAGE = "hermes_context_engine_plugins"
_VALID_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")

EngineSource = ContextEngine | type[ContextEngine] | Callable[..., ContextEngine]

_registered: dict[str, EngineSource] = {}
_plugin_dir: Path = DEFAULT_PLUGIN_DIR


class _PluginContext:
    """What a plugin's ``register(ctx)`` receives; it collects the engine the plugin offers."""

    def __init__(self) -> None:
        self.engines: list[EngineSource] = []

    def register_context_engine(self, engine: EngineSource, name: str | None = None) -> None:
        self.engines.append(engine)

    def __getattr__(self, attr: str) -> Callable[..., None]:
        # Other register_* hooks (commands, tools…) belong to other plugin systems: accept and ignore.
        if attr.startswith("register_"):
            return lambda *args, **kwargs: None
        raise AttributeError(attr)


def _source_name(source: EngineSource) -> str:
    return str(getattr(source, "name", "") or "")


def register_context_engine(engine: EngineSource, name: str | None = None) -> None:
    """Make an engine selectable by ``name`` (default: its ``name`` attribute).

    ``engine`` may be a ``ContextEngine`` subclass, a factory returning one, or an instance (which is
    deep-copied for every session).
    """
    key = name or _source_name(engine)
    if not key:
        raise ValueError("a context engine needs a name")
    if isinstance(engine, ContextEngine) or (inspect.isclass(engine) and issubclass(engine, ContextEngine)):
        pass
    elif not callable(engine):
        raise TypeError(f"not a ContextEngine, ContextEngine subclass or factory: {engine!r}")
    if key in _registered:
        log.warning("Context engine %r was already registered; replacing it", key)
    _registered[key] = engine


def registered_engines() -> list[str]:
    return sorted(_registered)


def set_plugin_dir(path: str | Path | None) -> None:
    """Where ``plugins/context_engine/<name>/`` folders are looked up (None restores the default)."""
    global _plugin_dir
    _plugin_dir = Path(path) if path is not None else DEFAULT_PLUGIN_DIR


def get_plugin_dir() -> Path:
    return _plugin_dir


def reset_registry() -> None:
    """Forget registered engines, loaded plugins and a custom plugin folder (for tests)."""
    _registered.clear()
    set_plugin_dir(None)
    for mod in [m for m in sys.modules if m == _PLUGIN_PACKAGE or m.startswith(_PLUGIN_PACKAGE + ".")]:
        del sys.modules[mod]


def _instantiate(source: EngineSource, kwargs: dict[str, Any]) -> ContextEngine:
    if isinstance(source, ContextEngine):
        return copy.deepcopy(source)
    try:
        params = tuple(inspect.signature(source).parameters.values())
    except (TypeError, ValueError):
        params = ()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        accepted = dict(kwargs)
    else:
        names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        accepted = {k: v for k, v in kwargs.items() if k in names}
    engine = source(**accepted)
    if not isinstance(engine, ContextEngine):
        raise TypeError(f"{source!r} did not produce a ContextEngine")
    return engine


def _load_plugin_module(name: str, root: Path) -> ModuleType | None:
    folder = root / name
    init = folder / "__init__.py"
    if not init.is_file():
        return None
    if _PLUGIN_PACKAGE not in sys.modules:
        pkg = ModuleType(_PLUGIN_PACKAGE)
        pkg.__path__ = []  # a namespace for loaded plugins; never searched on disk
        sys.modules[_PLUGIN_PACKAGE] = pkg
    mod_name = f"{_PLUGIN_PACKAGE}.{name.replace('-', '_')}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, init, submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module  # before exec, so the plugin's relative imports of siblings work
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return module


def _engine_from_plugin(name: str, root: Path) -> EngineSource | None:
    module = _load_plugin_module(name, root)
    if module is None:
        return None
    register = getattr(module, "register", None)
    if callable(register):
        ctx = _PluginContext()
        register(ctx)
        return ctx.engines[0] if ctx.engines else None
    for value in vars(module).values():
        if inspect.isclass(value) and issubclass(value, ContextEngine) and value is not ContextEngine:
            if value.__module__ == module.__name__ or value.__module__.startswith(module.__name__ + "."):
                return value
    return None


def _builtin(kwargs: dict[str, Any]) -> ContextEngine:
    return _instantiate(ContextCompressor, kwargs)


def _lcm(kwargs: dict[str, Any]) -> ContextEngine:
    return _instantiate(LcmEngine, kwargs)


def get_context_engine(
    name: str | None = None, *, plugin_dir: str | Path | None = None, **kwargs: Any
) -> ContextEngine:
    """A new engine for ``name``: plugin folder, then registered engine, then the built-in (warned)."""
    name = (name or BUILTIN_ENGINE).strip()
    if name == BUILTIN_ENGINE:
        return _builtin(kwargs)
    if name == LCM_ENGINE:
        return _lcm(kwargs)
    root = Path(plugin_dir) if plugin_dir is not None else _plugin_dir
    if _VALID_NAME.match(name):
        try:
            source = _engine_from_plugin(name, root)
            if source is not None:
                return _instantiate(source, kwargs)
        except Exception:
            log.exception("Context engine plugin %r failed to load", name)
    if name in _registered:
        try:
            return _instantiate(_registered[name], kwargs)
        except Exception:
            log.warning("Context engine %r could not be built — falling back to the built-in compressor", name,
                        exc_info=True)
            return _builtin(kwargs)
    log.warning("Context engine %r not found — falling back to the built-in compressor", name)
    return _builtin(kwargs)
