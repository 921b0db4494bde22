"""The lake package's import graph: nothing from `workspaces/`, and no module circle inside `lake/`.

Imports are read with `ast` (top-level and function-local alike, so a lazy import cannot hide a
circle), never by importing the modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dpone_dagster

PACKAGE_ROOT = Path(dpone_dagster.__file__).parent
LAKE = PACKAGE_ROOT / "lake"


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    return ".".join(relative.parts)


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in out if name.startswith("dpone_dagster.")}


def lake_graph(root: Path = LAKE) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in sorted(root.glob("*.py"))}
    return {name: {i for i in _imports(path) if i in modules and i != name} for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if state.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_lake_imports_nothing_from_workspaces():
    offenders = {
        _module_name(path): sorted(i for i in _imports(path) if i.startswith("dpone_dagster.workspaces"))
        for path in sorted(LAKE.glob("*.py"))
    }
    assert {m: found for m, found in offenders.items() if found} == {}


def test_lake_modules_import_no_circle():
    assert find_cycle(lake_graph()) is None


def test_the_cycle_finder_sees_a_lazy_import_circle(tmp_path):
    package = tmp_path / "dpone_dagster" / "lake"
    package.mkdir(parents=True)
    (package / "a.py").write_text("from dpone_dagster.lake.b import x\n")
    (package / "b.py").write_text("def f():\n    from dpone_dagster.lake import a\n")
    graph = {
        _module_name_in(tmp_path, p): {i for i in _imports(p) if i.startswith("dpone_dagster.lake.")}
        for p in package.glob("*.py")
    }
    assert find_cycle(graph) is not None


def _module_name_in(base: Path, path: Path) -> str:
    return ".".join(path.relative_to(base).with_suffix("").parts)


DEFS = PACKAGE_ROOT / "defs"


def defs_domain_graph(root: Path = DEFS) -> dict[str, set[str]]:
    """Domain → the other `defs/<domain>` packages any of its modules imports (lazy imports included)."""
    domains = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    graph: dict[str, set[str]] = {d: set() for d in domains}
    for domain in domains:
        for path in (root / domain).rglob("*.py"):
            for name in _imports(path):
                parts = name.split(".")
                if parts[:2] == ["dpone_dagster", "defs"] and len(parts) > 2 and parts[2] in domains:
                    if parts[2] != domain:
                        graph[domain].add(parts[2])
    return graph


def test_defs_lake_imports_nothing_from_defs_dbt():
    """dbt sits on the lake domain (`DuckLakeResource`, the `ducklake` kind); the lake never reaches up."""
    offenders = {
        _module_name(path): sorted(i for i in _imports(path) if i.startswith("dpone_dagster.defs.dbt"))
        for path in sorted((DEFS / "lake").rglob("*.py"))
    }
    assert {m: found for m, found in offenders.items() if found} == {}


def test_defs_domains_import_no_circle():
    assert find_cycle(defs_domain_graph()) is None
