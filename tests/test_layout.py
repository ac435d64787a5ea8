"""The layout holds: no import cycle between the project's modules (imports inside functions
included, with one sanctioned exception: a Celery task module imports the services it calls inside
the task bodies, while services import the tasks at the top — HackSoft's form), dependencies point
the way docs/architecture.md draws them, and no module outside tests and migrations grows past the
size a newcomer can read in one sitting."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("hermes_web", "staff", "sessions", "compression", "llm", "simulator", "plugins", "bench")
MAX_LINES = 450  # "about 400"

# package -> the project packages it must never import (ARCHITECTURE: dependencies point downwards)
FORBIDDEN = {
    "sessions": {"staff", "hermes_web", "bench"},
    "compression": {"sessions", "staff", "hermes_web", "simulator", "bench"},
    "llm": {"sessions", "staff", "hermes_web", "compression", "simulator", "bench"},
    "simulator": {"sessions", "staff", "hermes_web", "bench"},
    "staff": {"hermes_web", "bench"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                modules[module_name(path)] = path
    return modules


def _nodes(tree: ast.Module, *, top_level_only: bool):
    if not top_level_only:
        yield from ast.walk(tree)
        return
    for node in tree.body:  # a task module: only what it imports at module level
        yield from ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else ()


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every project module `path` imports, at any depth of the file (lazy imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in _nodes(tree, top_level_only=name.endswith(".tasks")):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(path, name, known) for name, path in modules.items()}


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; components with more than one module are cycles."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(component)

    for v in edges:
        if v not in index:
            visit(v)
    return [sorted(c) for c in out if len(c) > 1]


def package_parents(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_no_module_imports_itself_back():
    edges = graph()
    # A package's __init__ re-exporting its submodules is not a cycle of code; drop those edges.
    edges = {m: {t for t in targets if t not in package_parents(m)} for m, targets in edges.items()}
    assert strongly_connected(edges) == []


def test_dependencies_point_downwards():
    wrong = []
    for module, targets in graph().items():
        top = module.split(".")[0]
        for target in targets:
            if target.split(".")[0] in FORBIDDEN.get(top, set()):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_module_outside_tests_and_migrations_is_too_long_to_read():
    long = {name: n for name, path in project_modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
