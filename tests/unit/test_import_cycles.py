"""No import cycles in outlast/: every import statement (lazy ones inside functions too) draws an
edge between its modules, and the graph must have no strongly connected component but single
modules. A cycle (jobs.py importing watch.py, which imported jobs.py back) means support code
that belongs in a module of its own. The same graph holds local mode away from the repository's
tools, which the wheel leaves out: an installed local mode that imported one would not start."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "outlast"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _module_of(base: str, name: str, known: set[str]) -> str:
    """`from base import name` imports the module base.name when there is one, else names of base."""
    return f"{base}.{name}" if f"{base}.{name}" in known else base


def _imported(module: str, path: Path, known: set[str]) -> Iterator[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [_module_of(base, alias.name, known) for alias in node.names]
        else:
            continue
        yield from (name for name in names if name in known and name != module)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {module: set(_imported(module, path, known)) for module, path in modules.items()}


def _reachable(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    seen, pending = set(start), list(start)
    while pending:
        for target in graph[pending.pop()] - seen:
            seen.add(target)
            pending.append(target)
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:  # noqa: C901 - Tarjan's, as written
    """Tarjan's strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_outlast_has_no_import_cycles():
    assert _cycles(_graph()) == []


def test_local_mode_imports_none_of_the_repository_tools():
    graph = _graph()
    local = {module for module in graph if module.startswith("outlast.local")}

    reached = _reachable(graph, local)

    assert {m for m in reached if m.startswith(("outlast.chaos", "outlast.bench", "outlast.fuzz"))} == set()


def test_the_check_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
