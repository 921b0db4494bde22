"""The package's import graph, read with `ast` (no module is imported): no cycles, layers point down.

Every `import` / `from … import` anywhere in a module counts, including imports inside functions:
a function-local import still makes the two modules depend on each other (that is how
`release.packs` and `release.flows` used to import each other, through the fixture CLI).

What a reader could get wrong: a package-wide cycle outside `release/` that already existed when
this test was written is listed in `KNOWN_CYCLES` and tolerated only as it is or smaller; any new
cycle, or any cycle touching `dpone_dagster.release`, fails.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "dpone_dagster"

# Cycles that predate this test, outside release/ (owned elsewhere). Shrinking them is fine.
KNOWN_CYCLES = (
    frozenset({"dpone_dagster.lake.catalogs", "dpone_dagster.lake.resolution.fork", "dpone_dagster.lake.resolution.seam", "dpone_dagster.lake.state.tracking"}),
)
TEST_ONLY_ROOTS = ("tests", "bench", "conftest")


def _modules(root: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every absolute dotted name `module` imports (relative imports resolved), at any depth."""
    names: set[str] = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the package modules it imports (a `from pkg import name` edge goes to pkg.name if that is a module)."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        edges = set()
        for name in imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                edges.add(name)
        graph[module] = edges
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_cycle_finder_sees_a_function_local_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def f():\n    from . import a\n")
    (package / "c.py").write_text("import pkg.a\n")
    graph = import_graph(_modules(package))
    assert cycles(graph) == [frozenset({"pkg.a", "pkg.b"})]


def test_no_release_module_is_part_of_an_import_cycle():
    release_cycles = [sorted(c) for c in cycles(import_graph(_modules())) if any(m.startswith("dpone_dagster.release") for m in c)]
    assert release_cycles == []


def test_flows_and_packs_depend_one_way_only():
    graph = import_graph(_modules())
    assert "dpone_dagster.release.build.packs" in graph["dpone_dagster.release.build.flows"]
    assert not any(m.startswith("dpone_dagster.release.build.flows") for m in graph["dpone_dagster.release.build.packs"])


def test_no_new_import_cycle_anywhere_in_the_package():
    new = [sorted(c) for c in cycles(import_graph(_modules())) if not any(c <= known for known in KNOWN_CYCLES)]
    assert new == []


def test_release_services_never_import_entry_points():
    graph = import_graph(_modules())
    upward = {
        (module, target)
        for module, targets in graph.items()
        if module.startswith("dpone_dagster.release.")
        for target in targets
        if target.split(".")[1] in ("defs", "deployment", "cli")
    }
    assert upward == set()


def test_shipped_code_never_imports_fabricated_test_inputs():
    """Fabricated fixtures live in tests/ (`tests.release.fabricated`); the package must not reach them."""
    modules = _modules()
    offending = {
        (module, name)
        for module, path in modules.items()
        for name in imported_names(module, path)
        if name.split(".")[0] in TEST_ONLY_ROOTS or "fabricated" in name.split(".")
    }
    assert offending == set()
    assert "dpone_dagster.release.synthetic" not in modules
    shipped = "\n".join(path.read_text() for path in modules.values())
    for fabricated_name in ("class MemorySource", "def synthetic_native(", "def synthetic_workload(", "class SyntheticTarget:"):
        assert fabricated_name not in shipped
