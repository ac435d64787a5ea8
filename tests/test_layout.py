"""The layout holds: no import cycle between the project's modules (imports inside functions
included: services enqueue Celery tasks by name and never import the task modules), dependencies
point the way docs/architecture.md draws them, and no module outside tests and migrations grows
past the size a newcomer can read in one sitting."""
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


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    modules = {}
    for package in packages:
        for path in (root / package).rglob("*.py"):
            if "migrations" not in path.relative_to(root).parts:
                modules[module_name(path, root)] = path
    return modules


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every project module `path` imports, at any depth of the file: function bodies (lazy
    imports) and `if TYPE_CHECKING:` blocks included. `from a.b import c` counts as importing
    `a.b` and, when it is a module, `a.b.c`; a name that is no module counts as its module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
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


def graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    modules = project_modules(root, packages)
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


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, directly or around a loop.

    A module importing its own package (whose __init__ may re-export the module's names) is left
    out: that is the package's table of contents, not a cycle of code."""
    edges = {m: {t for t in targets if t not in package_parents(m)} for m, targets in edges.items()}
    return sorted(strongly_connected(edges))


def test_no_module_imports_itself_back():
    assert import_cycles(graph()) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_cycle_check_sees_imports_inside_functions(tmp_path):
    # A service importing a task module at the top, the task importing the service in its body.
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/services/__init__.py": "",
        "app/services/jobs.py": "from app.tasks import job_run\n",
        "app/tasks.py": "def job_run():\n    from app.services import jobs\n    return jobs\n",
    })
    assert import_cycles(graph(tmp_path, ("app",))) == [["app.services.jobs", "app.tasks"]]


def test_the_cycle_check_sees_relative_imports_in_methods_and_type_checking_blocks(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/a.py": "class A:\n    def b(self):\n        from . import b\n        return b\n",
        "app/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .c import C\n",
        "app/c.py": "from app.a import A\nC = A\n",
    })
    assert import_cycles(graph(tmp_path, ("app",))) == [["app.a", "app.b", "app.c"]]


def test_a_package_re_exporting_its_modules_is_no_cycle(tmp_path):
    _write(tmp_path, {
        "app/__init__.py": "",
        "app/tools/__init__.py": "from app.tools.files import read\n",
        "app/tools/files.py": "from app.tools import base\ndef read():\n    return base\n",
        "app/tools/base.py": "",
        "app/loop.py": "from app.tools import read\n",
    })
    assert import_cycles(graph(tmp_path, ("app",))) == []


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
