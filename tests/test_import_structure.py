"""The package's imports point one way: no cycles between modules, each package imports only the packages below it,
the planner and the deployment tools stay free of torch, and the command line loads torch only when a command runs.

Every module under src/dspark is parsed with `ast` (nothing is imported). Both top-level and function-level imports
count, in all their spellings: `import dspark.x.y`, `from dspark.x import y`, `from dspark.x.y import name` and
relative imports. `from package import name` is an edge to the submodule `package.name` when one exists, else to the
package's `__init__`. Imports by string (`importlib.import_module(...)`) are not seen.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "dspark"
TORCH_LIKE = ("torch", "transformers", "safetensors")

# Which packages of dspark each package may import (besides itself). A "package" is the first name below dspark:
# a subpackage (`dspark.engine`) or a top-level module (`dspark.config`, `dspark.demo`). "dspark" is the root
# `__init__`, which re-exports the public API lazily by name.
ALLOWED: dict[str, frozenset[str]] = {
    "dspark": frozenset({"config"}),
    "config": frozenset(),
    "files": frozenset(),
    "assets": frozenset(),
    "model": frozenset({"config", "files"}),
    "engine": frozenset({"config", "files", "model"}),
    "formats": frozenset({"config", "files", "model"}),
    "bench": frozenset({"config", "files", "model", "engine", "formats"}),
    "serve": frozenset({"config", "files", "assets", "model", "engine", "formats"}),
    "train": frozenset({"config", "files", "model", "engine", "formats"}),
    "testbed": frozenset({"config", "files", "model", "engine", "formats", "train"}),
    "plan": frozenset({"config", "files"}),
    "deploy": frozenset({"config", "files", "plan"}),
    "demo": frozenset({"config", "files", "assets", "model", "engine", "formats", "bench", "train", "testbed"}),
    "cli": frozenset({"dspark", "config", "files", "assets", "model", "engine", "formats", "bench", "serve", "train",
                      "testbed", "plan", "deploy", "demo"}),
}
TORCH_FREE = ("plan", "deploy")  # these packages (and every dspark module they reach) never import torch


@dataclass(frozen=True)
class Import:
    target: str  # the imported module's dotted name
    line: int
    top_level: bool  # runs when the importing module is imported (not inside a function or a TYPE_CHECKING block)


@lru_cache(maxsize=None)
def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted((SRC / ROOT).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _resolve(name: str) -> str:
    """The longest prefix of `name` that is a module of ours (`dspark.x.y.Class` -> `dspark.x.y`)."""
    while name not in modules() and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node: ast.AST, top_level: bool):
    """(import node, top_level) for every import below `node`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, top_level
        inner = top_level and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and not (
            isinstance(child, ast.If) and _is_type_checking(child))
        yield from _walk(child, inner)


@lru_cache(maxsize=None)
def imports_of(module: str) -> tuple[Import, ...]:
    """Every import in `module`'s source (standard library and third-party ones included)."""
    path = modules()[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node, top in _walk(ast.parse(path.read_text(), str(path)), True):
        if isinstance(node, ast.Import):
            out += [Import(alias.name, node.lineno, top) for alias in node.names]
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        submodules = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules()]
        out += [Import(name, node.lineno, top) for name in submodules]
        if len(submodules) < len(node.names):
            out.append(Import(source, node.lineno, top))
    return tuple(out)


def internal_imports(module: str, top_level_only: bool = False) -> list[Import]:
    return [Import(_resolve(i.target), i.line, i.top_level) for i in imports_of(module)
            if (i.target == ROOT or i.target.startswith(ROOT + ".")) and (i.top_level or not top_level_only)]


def graph(top_level_only: bool = False) -> dict[str, list[Import]]:
    return {m: [i for i in internal_imports(m, top_level_only) if i.target != m] for m in modules()}


def where(module: str, line: int) -> str:
    return f"{modules()[module].relative_to(SRC.parent)}:{line}"


def find_cycles(edges: dict[str, list[Import]]) -> list[list[str]]:
    """One cycle (as a path that returns to its start) per strongly connected component with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for edge in edges.get(v, ()):
            w = edge.target
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
            if len(component) > 1:
                components.append(component)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        members, start = set(component), min(component)
        path, seen = [start], {start}
        while True:  # walk inside the component until a module repeats
            nxt = next(e.target for e in edges[path[-1]] if e.target in members and (e.target == start or
                                                                                       e.target not in seen))
            path.append(nxt)
            if nxt == start:
                break
            seen.add(nxt)
        cycles.append(path)
    return cycles


def _describe(cycle: list[str], edges: dict[str, list[Import]]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:]):
        line = next(e.line for e in edges[a] if e.target == b)
        steps.append(f"{a} -> {b} ({where(a, line)})")
    return "\n    ".join(steps)


@pytest.mark.slow
def test_the_modules_import_each_other_without_cycles():
    edges = graph()
    cycles = find_cycles(edges)
    assert not cycles, "import cycles:\n  " + "\n  ".join(_describe(c, edges) for c in cycles)


def test_the_allowed_package_dependencies_form_no_cycle_themselves():
    table = {p: [Import(q, 0, True) for q in deps] for p, deps in ALLOWED.items()}
    assert not find_cycles(table)


def test_every_package_imports_only_the_packages_below_it():
    packages = {package_of(m) for m in modules()}
    assert packages <= set(ALLOWED), f"packages without a row in ALLOWED: {sorted(packages - set(ALLOWED))}"
    wrong = []
    for module, edges in graph().items():
        src = package_of(module)
        for edge in edges:
            dst = package_of(edge.target)
            if dst != src and dst not in ALLOWED[src]:
                wrong.append(f"{where(module, edge.line)}: {src} -> {dst} ({edge.target})")
    assert not wrong, "imports against the layering:\n  " + "\n  ".join(sorted(wrong))


def _torch_imports(module: str, top_level_only: bool) -> list[str]:
    return [f"{where(module, i.line)}: import {i.target}" for i in imports_of(module)
            if i.target.split(".")[0] in TORCH_LIKE and (i.top_level or not top_level_only)]


def _reach(start: list[str], edges: dict[str, list[Import]]) -> dict[str, str]:
    """Every module reachable from `start`, with the module that first imported it."""
    seen = {m: m for m in start}
    todo = list(start)
    while todo:
        m = todo.pop()
        for e in edges[m]:
            if e.target not in seen:
                seen[e.target] = m
                todo.append(e.target)
    return seen


def test_plan_and_deploy_import_no_torch_transformers_or_safetensors_even_lazily():
    edges = graph()
    start = [m for m in modules() if package_of(m) in TORCH_FREE]
    reached = _reach(start, edges)
    bad = [f"{hit} (reached from {via})" for m, via in sorted(reached.items()) for hit in _torch_imports(m, False)]
    assert not bad, "torch-like imports in or under plan/deploy:\n  " + "\n  ".join(bad)


def test_cli_modules_import_no_torch_when_the_command_line_loads():
    edges = graph(top_level_only=True)
    start = [m for m in modules() if package_of(m) == "cli"]
    reached = _reach(start, edges)
    bad = [f"{hit} (reached from {via})" for m, via in sorted(reached.items()) for hit in _torch_imports(m, True)]
    assert not bad, "top-level torch-like imports reached from dspark.cli:\n  " + "\n  ".join(bad)


def test_the_scanner_sees_relative_function_level_and_submodule_imports(tmp_path):
    # a self-check of the parser on this package's own spellings
    names = {i.target for i in imports_of("dspark.cli")}
    assert "argparse" in names and "importlib" in names
    assert all(m.startswith(ROOT) for m in modules())
    sample = ast.parse("def f():\n    from . import x\n")
    node, top = next(_walk(sample, True))
    assert isinstance(node, ast.ImportFrom) and node.level == 1 and top is False
