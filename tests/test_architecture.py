"""The map's layer table against every import of the package: no import up the table, none the table
does not allow, no import cycle, nothing outside the package reached, and no allowance list.

The table is READ from docs/architecture.md (section "Layers"): one row per package with its layer,
its modules (paths under `dpone_dagster/`: `dir/` for a folder, `file.py` for one module; the
longest path that matches a module wins) and the rows it may import. A row may name only rows below
it, and it may import what they may import, so the table cannot allow an upward import or a circle.
Imports are read with `ast` (no module is imported), at any depth: module level, inside functions,
under `if TYPE_CHECKING:`; a lazy import is still a dependency and still closes a circle.

What a reader could get wrong: an import this test reports is fixed in the code (or the map changes
because the structure did), never excused here. A module the table does not place fails too, so a
new package or a new `defs/` domain gets its row in the map first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "dpone_dagster"
MAP = REPO / "docs" / "architecture.md"
NOT_SHIPPED = ("tests", "bench", "devtools")
"""Top-level folders of the repository that are not packaged: the package never imports them."""


@dataclass(frozen=True)
class Row:
    layer: str
    package: str
    paths: tuple[str, ...]
    may_import: tuple[str, ...]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def read_layer_table(text: str) -> list[Row]:
    """The rows of the first table under `## Layers`, top of the stack first."""
    section = re.split(r"^## Layers\s*$", text, maxsplit=1, flags=re.M)[1]
    section = re.split(r"^## ", section, maxsplit=1, flags=re.M)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.lower() for cell in _cells(lines[0])]
    column = {
        name: next(i for i, cell in enumerate(header) if cell.startswith(name))
        for name in ("layer", "package", "modules", "may import")
    }
    rows = []
    for line in lines[2:]:
        cells = _cells(line)
        names = re.findall(r"`([^`]+)`", cells[column["package"]])
        if len(names) != 1:
            raise ValueError(f"a row names exactly one package: {line}")
        rows.append(
            Row(
                layer=cells[column["layer"]],
                package=names[0],
                paths=tuple(re.findall(r"`([^`]+)`", cells[column["modules"]])),
                may_import=tuple(re.findall(r"`([^`]+)`", cells[column["may import"]])),
            )
        )
    return rows


def table_problems(rows: list[Row], root: Path) -> list[str]:
    """What makes a table unusable as a map.

    Unknown or upward names, repeated paths or layers, paths that do not exist.
    """
    problems = []
    position = {row.package: i for i, row in enumerate(rows)}
    if len(position) != len(rows):
        problems.append("a package has two rows")
    seen_paths: set[str] = set()
    for i, row in enumerate(rows):
        if not row.paths:
            problems.append(f"{row.package}: no modules")
        for name in row.may_import:
            if name not in position:
                problems.append(f"{row.package}: may import unknown row {name}")
            elif position[name] <= i:
                problems.append(f"{row.package}: may import {name}, which is not below it")
        for path in row.paths:
            if path in seen_paths:
                problems.append(f"{path}: in two rows")
            seen_paths.add(path)
            if not (root / path.rstrip("/")).exists():
                problems.append(f"{row.package}: {path} does not exist")
    layers = [row.layer for row in rows]
    for layer in set(layers):
        first, last = layers.index(layer), len(layers) - 1 - layers[::-1].index(layer)
        if layers[first : last + 1] != [layer] * (last - first + 1):
            problems.append(f"layer {layer}: its rows are not together")
    return problems


def allowed_imports(rows: list[Row]) -> dict[str, set[str]]:
    """Row -> every row it may import: the ones it names, and what those may import."""
    by_name = {row.package: row for row in rows}
    allowed: dict[str, set[str]] = {}
    for row in reversed(rows):
        reach = {row.package}
        for name in row.may_import:
            reach |= allowed.get(name, {name})
        allowed[row.package] = reach
    return {name: allowed[name] for name in by_name}


def package_modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package at `root`."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every absolute dotted name `module` imports, relative imports resolved, at any depth."""
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
    """Module -> the package modules it imports (`from pkg import name` goes to pkg.name when that is a module)."""
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


def row_of(module_path: str, rows: Iterable[Row]) -> str | None:
    """The row whose longest path matches `module_path` (relative to the package root)."""
    best, length = None, -1
    for row in rows:
        for path in row.paths:
            matches = module_path.startswith(path) if path.endswith("/") else module_path == path
            if matches and len(path) > length:
                best, length = row.package, len(path)
    return best


def placement(modules: Mapping[str, Path], rows: list[Row], root: Path) -> dict[str, str | None]:
    return {module: row_of(path.relative_to(root).as_posix(), rows) for module, path in modules.items()}


def import_violations(graph: Mapping[str, set[str]], rows: list[Row], placed: Mapping[str, str | None]) -> list[str]:
    position = {row.package: i for i, row in enumerate(rows)}
    allowed = allowed_imports(rows)
    found = []
    for module, targets in sorted(graph.items()):
        source = placed[module]
        for target in sorted(targets):
            into = placed[target]
            if source is None or into is None or into in allowed[source]:
                continue
            how = "up the table" if position[into] < position[source] else "not allowed by the table"
            found.append(f"{module} -> {target} ({source} -> {into}: {how})")
    return found


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (iterative Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(sorted(graph[start])))]
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def _steps_up(node: ast.AST) -> int | None:
    """How many folders up from the module's own file `node` climbs, or None when it is not a path of `__file__`."""
    if isinstance(node, ast.Name):
        return 0 if node.id == "__file__" else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = _steps_up(node.value)
        return None if inner is None else inner + 1
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents":
        inner = _steps_up(node.value.value)
        index = node.slice.value if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int) else None
        return None if inner is None or index is None else inner + index + 1
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Attribute) and function.attr in ("resolve", "absolute") and not node.args:
            return _steps_up(function.value)
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
        if name in ("Path", "PurePath", "realpath", "abspath") and len(node.args) == 1:
            return _steps_up(node.args[0])
        if name == "dirname" and len(node.args) == 1:
            inner = _steps_up(node.args[0])
            return None if inner is None else inner + 1
    return None


def climbs_out(root: Path, path: Path) -> list[int]:
    """Lines of `path` where a path built from `__file__` leaves the package at `root`."""
    folders_below_root = len(path.relative_to(root).parts) - 1
    lines = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        steps = _steps_up(node)
        if steps is not None and steps >= folders_below_root + 2:
            lines.add(node.lineno)
    return sorted(lines)


def _map_rows() -> list[Row]:
    return read_layer_table(MAP.read_text(encoding="utf-8"))


def test_the_maps_layer_table_is_readable_and_points_down():
    rows = _map_rows()
    assert len(rows) > 5
    assert table_problems(rows, PACKAGE) == []


def test_every_module_of_the_package_has_a_row_in_the_map():
    placed = placement(package_modules(PACKAGE), _map_rows(), PACKAGE)
    assert sorted(module for module, row in placed.items() if row is None) == []


def test_no_import_goes_up_the_map_or_between_rows_it_does_not_allow():
    rows = _map_rows()
    modules = package_modules(PACKAGE)
    assert import_violations(import_graph(modules), rows, placement(modules, rows, PACKAGE)) == []


def test_the_package_has_no_import_cycle():
    assert cycles(import_graph(package_modules(PACKAGE))) == []


def test_the_package_imports_nothing_that_is_not_shipped():
    offending = sorted(
        f"{module} -> {name}"
        for module, path in package_modules(PACKAGE).items()
        for name in imported_names(module, path)
        if name.split(".")[0] in NOT_SHIPPED
    )
    assert offending == []


def test_no_module_reaches_the_repository_through_its_own_file():
    offending = {
        path.relative_to(REPO).as_posix(): lines
        for path in package_modules(PACKAGE).values()
        if (lines := climbs_out(PACKAGE, path))
    }
    assert offending == {}


def test_every_module_the_map_names_exists():
    """A path in the map (`lake/resolution/seam.py`, `tests/lake/test_naming.py`) names a real file or folder."""
    text = MAP.read_text(encoding="utf-8")
    named = {m.group(1) for m in re.finditer(r"`([a-z_][a-z0-9_/]*(?:\.py|/))(?::[^`]*)?`", text)}
    missing = sorted(p for p in named if not (PACKAGE / p).exists() and not (REPO / p).exists())
    assert missing == []


# The checks above, shown to fail on a small package built here.

TABLE = """
## Layers

| Layer | Package | Modules | May import |
|---|---|---|---|
| Top | `app` | `app/` | `core` |
| Base | `core` | `core/`, `__init__.py` | — |

## Next
"""


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", "app/__init__.py": "", "core/__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _violations(root: Path, table: str = TABLE) -> list[str]:
    rows = read_layer_table(table)
    modules = package_modules(root)
    return import_violations(import_graph(modules), rows, placement(modules, rows, root))


def test_an_import_up_the_table_is_reported_even_inside_a_function(tmp_path):
    root = _package(
        tmp_path,
        {"app/run.py": "from pkg.core import base\n", "core/base.py": "def f():\n    from pkg.app import run\n"},
    )
    assert _violations(root) == [
        "pkg.core.base -> pkg.app (core -> app: up the table)",
        "pkg.core.base -> pkg.app.run (core -> app: up the table)",
    ]


def test_an_import_between_rows_the_table_does_not_connect_is_reported(tmp_path):
    table = TABLE.replace("| `app` | `app/` | `core` |", "| `app` | `app/` | — |\n| Middle | `lib` | `lib/` | `core` |")
    root = _package(tmp_path, {"lib/__init__.py": "", "app/run.py": "from ..core import base\n", "core/base.py": ""})
    assert table_problems(read_layer_table(table), root) == []
    assert _violations(root, table) == [
        "pkg.app.run -> pkg.core (app -> core: not allowed by the table)",
        "pkg.app.run -> pkg.core.base (app -> core: not allowed by the table)",
    ]


def test_a_table_naming_a_row_above_or_an_unknown_row_is_refused(tmp_path):
    root = _package(tmp_path, {})
    upward = TABLE.replace("| `core/`, `__init__.py` | — |", "| `core/`, `__init__.py` | `app` |")
    assert table_problems(read_layer_table(upward), root) == ["core: may import app, which is not below it"]
    unknown = TABLE.replace("| `app/` | `core` |", "| `app/` | `kernel` |")
    assert table_problems(read_layer_table(unknown), root) == ["app: may import unknown row kernel"]


def test_a_module_without_a_row_is_found(tmp_path):
    root = _package(tmp_path, {"extra/__init__.py": ""})
    placed = placement(package_modules(root), read_layer_table(TABLE), root)
    assert [module for module, row in placed.items() if row is None] == ["pkg.extra"]


def test_a_function_local_cycle_is_found(tmp_path):
    root = _package(
        tmp_path, {"core/a.py": "from pkg.core.b import thing\n", "core/b.py": "def f():\n    from . import a\n"}
    )
    assert cycles(import_graph(package_modules(root))) == [["pkg.core.a", "pkg.core.b"]]


@pytest.mark.parametrize(
    ("where", "code", "out"),
    [
        ("core/x.py", "Path(__file__).resolve().parents[2]", True),
        ("core/x.py", "Path(__file__).parent.parent.parent", True),
        ("core/x.py", "os.path.dirname(os.path.dirname(os.path.dirname(__file__)))", True),
        ("x.py", "Path(__file__).resolve().parent.parent", True),
        ("core/x.py", "Path(__file__).resolve().parent.parent", False),
        ("x.py", "Path(__file__).with_name('data.json')", False),
    ],
)
def test_a_path_leaving_the_package_through_its_own_file_is_found(tmp_path, where, code, out):
    root = _package(tmp_path, {where: f"import os\nfrom pathlib import Path\nHERE = {code}\n"})
    assert bool(climbs_out(root, root / where)) is out
