"""Find every error code in the package's source, and import every module so each class declares its codes.

`scan_codes()` reads `dpone_dagster/**/*.py` as syntax trees (nothing is imported) and reports each
place a code appears: a class body's `code = "..."`, the keys of a class body's `codes = {...}`, a
string member of an `...Enum` class, a `code="..."` keyword at a call, the first argument of a call
to a `...Error` (`SourceError("source.empty", ...)`), and any other code-shaped literal whose area
(first word) is an area some code already has, e.g. a fallback `getattr(exc, "code",
"lake.role_drop_failed")` that ends up in a report. File names (`dpone.yaml`) are not codes.

`import_every_module()` imports each module of the package so that `dpone_dagster.errors` has seen
every class's declaration; a module that cannot be imported is an error, not a skip.

The one thing a reader could get wrong: the scan is deliberately wider than the register. A literal
that only looks like a code (an area's word, a dot, a word) is reported too; the catalogue test then
demands a meaning for it, which is the point: an operator may read any string the package emits as a
code. Add a file suffix to `_FILE_SUFFIXES` only for what really is a file name.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import dpone_dagster
from dpone_dagster.errors import CODE_SHAPE

PACKAGE_ROOT = Path(dpone_dagster.__file__).resolve().parent

CATALOG_MODULE = "error_catalog.py"
_FILE_SUFFIXES = frozenset(
    {"yaml", "yml", "json", "toml", "lock", "sql", "py", "md", "txt", "csv", "parquet", "ducklake"}
)


@dataclass(frozen=True, order=True)
class CodeSite:
    """One place `code` appears: `module` is the path below `dpone_dagster/`, `form` how it was written."""

    code: str
    module: str
    line: int
    form: str  # "code", "codes", "enum", "code=", "call", "literal"
    raised_as: str | None = None  # the class named at `code=` / `...Error(code, ...)`, or the enum of a member


def import_every_module(package: str = "dpone_dagster") -> list[str]:
    """Import every module of `package` (the whole of `dpone_dagster` by default); returns their names.

    Raises the first import failure."""
    folder = PACKAGE_ROOT.joinpath(*package.split(".")[1:])
    names = [info.name for info in pkgutil.walk_packages([str(folder)], f"{package}.")]
    for name in names:
        importlib.import_module(name)
    return names


def scan_codes(root: Path = PACKAGE_ROOT, known_areas: Iterable[str] = ()) -> list[CodeSite]:
    """Every code-like string in the Python files under `root`, sorted by code, module and line.

    The catalogue itself (`error_catalog.py`) is not read: its keys are meanings, not uses."""
    paths = [path for path in sorted(root.rglob("*.py")) if path.relative_to(root).as_posix() != CATALOG_MODULE]
    trees = {path.relative_to(root).as_posix(): ast.parse(path.read_text(encoding="utf-8")) for path in paths}
    sites: list[CodeSite] = []
    claimed: set[int] = set()
    for module, tree in trees.items():
        for node in ast.walk(tree):
            sites += _declared_in(node, module, claimed)
    areas = {site.code.split(".", 1)[0] for site in sites} | set(known_areas)
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if id(node) not in claimed and _is_code(node) and node.value.split(".", 1)[0] in areas:  # type: ignore[attr-defined]
                sites.append(CodeSite(node.value, module, node.lineno, "literal"))  # type: ignore[attr-defined]
    return sorted(set(sites))


def _declared_in(node: ast.AST, module: str, claimed: set[int]) -> list[CodeSite]:
    found: list[tuple[ast.Constant, str, str | None]] = []
    if isinstance(node, ast.ClassDef):
        is_enum = any(_name_of(base).endswith("Enum") for base in node.bases)
        for statement in node.body:
            target, value = _assignment(statement)
            if target == "code" and _is_code(value):
                found.append((value, "code", None))  # type: ignore[arg-type]
            elif target == "codes" and isinstance(value, ast.Dict):
                found += [(key, "codes", None) for key in value.keys if _is_code(key)]  # type: ignore[misc]
            elif is_enum and target is not None and _is_code(value):
                found.append((value, "enum", node.name))  # type: ignore[arg-type]
    elif isinstance(node, ast.Call):
        callee = _name_of(node.func)
        found += [(k.value, "code=", callee) for k in node.keywords if k.arg == "code" and _is_code(k.value)]  # type: ignore[misc]
        if node.args and _is_code(node.args[0]) and callee.endswith("Error"):
            found.append((node.args[0], "call", callee))  # type: ignore[arg-type]
    claimed.update(id(constant) for constant, _, _ in found)
    return [CodeSite(constant.value, module, constant.lineno, form, raised_as) for constant, form, raised_as in found]


def _assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _is_code(node: ast.AST | None) -> bool:
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE_SHAPE.fullmatch(node.value)):
        return False
    return node.value.rsplit(".", 1)[1] not in _FILE_SUFFIXES


def _name_of(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""
