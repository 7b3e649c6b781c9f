"""The import graph of evokernel's modules, read from the source (nothing is imported).

Used by tests/core/test_layout.py and by ``python -m tests.support.imports`` (which prints the
stage graph that docs/architecture.md draws).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Folder -> the package it installs as (pyproject's package-dir).
FOLDERS = {
    "evokernel": "evokernel",
    "strategies": "evokernel.strategies",
    "islands": "evokernel.islands",
    "mutators": "evokernel.mutators",
    "db": "evokernel.db",
}
# Modules whose imports are not part of the product's layering (alembic's own scripts).
SKIP_PARTS = ("migrations",)


def product_modules() -> dict[str, Path]:
    """Module name -> file, for every module installed under evokernel.*."""
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            if any(part in SKIP_PARTS for part in rel.parts) or "__pycache__" in rel.parts:
                continue
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Every module name ``path`` imports, wherever the import statement sits (lazy imports in
    functions and ``TYPE_CHECKING`` blocks included: a cycle through them is still a cycle in the
    design). ``from a import b`` yields ``a.b`` as well as ``a`` (the caller keeps what exists)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.add(target)
            names.update(f"{target}.{alias.name}" for alias in node.names)
    return names


def module_graph() -> dict[str, set[str]]:
    """Module -> the evokernel modules it imports (no edge to itself). ``from evokernel.pool
    import EvaluatorPool`` is an edge to ``evokernel.pool`` (the package's ``__init__``); the
    parent packages Python initialises on the way are not edges (they are initialised first and
    never re-entered, which is why import-linter and friends leave them out too)."""
    modules = product_modules()
    return {
        name: {
            imported for imported in imported_names(path, name) if imported in modules and imported != name
        }
        for name, path in modules.items()
    }


def imports_of_tests(path: Path) -> set[str]:
    """Names a product file imports from the tests tree."""
    return {n for n in imported_names(path, "") if n == "tests" or n.startswith("tests.")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def stage_of(module: str) -> str:
    """The stage a module belongs to: ``evokernel.run.engine`` -> ``run``; a top-level module is
    its own stage (``evokernel.types`` -> ``types``); ``evokernel`` itself -> ``evokernel``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def stage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Stage -> stages it imports, leaving out the package root (``evokernel/__init__`` re-exports
    the public API from every stage) and imports within a stage."""
    stages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        source = stage_of(module)
        if source == "evokernel":
            continue
        edges = stages.setdefault(source, set())
        for target in targets:
            dest = stage_of(target)
            if dest not in (source, "evokernel"):
                edges.add(dest)
    return stages


if __name__ == "__main__":
    for stage, deps in sorted(stage_graph(module_graph()).items()):
        print(f"{stage}: {', '.join(sorted(deps)) or '-'}")
