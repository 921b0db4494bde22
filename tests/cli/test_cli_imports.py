"""`dpone_dagster.cli` imports services, never this repository's code location (`defs/`, `definitions.py`).

Every `import` / `from … import` in every module under `dpone_dagster/cli/` counts, at any depth
(function-local imports included, relative imports resolved), and so does a string naming a module
under `dpone_dagster.defs` (an `importlib.import_module("dpone_dagster.defs…")` is the same import).
The one name of the location a command may hold is the default *value* of the module it loads
(`dpone_dagster.cli.location.DEFAULT_LOCATION`), never an import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dpone_dagster.cli

CLI = Path(dpone_dagster.cli.__file__).parent
LOCATION_PACKAGES = ("dpone_dagster.defs", "dpone_dagster.definitions")


def _is_location(name: str) -> bool:
    return any(name == package or name.startswith(package + ".") for package in LOCATION_PACKAGES)


def location_imports(path: Path) -> list[str]:
    """Every place `path` (a module of `dpone_dagster.cli`) imports, or names as a module, the code location."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to dpone_dagster.cli (a package of modules, no sub-packages)
                anchor = ["dpone_dagster", "cli"][: 2 - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith("dpone_dagster.defs")
        ):
            names = [node.value]
        found += [f"{path.name}:{node.lineno}: {name}" for name in names if _is_location(name)]
    return found


def test_no_cli_module_imports_the_code_location():
    modules = sorted(CLI.rglob("*.py"))
    assert len(modules) >= 8  # every command module is read, not an empty glob
    offending = [hit for path in modules for hit in location_imports(path)]
    assert offending == []


def test_the_reader_sees_every_shape_of_such_an_import(tmp_path):
    """The reader itself: each shape below is one hit (so an empty result above means something)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import dpone_dagster.defs.release\n"
        "from dpone_dagster import definitions\n"
        "from dpone_dagster.defs.release.run import x\n"
        "def f():\n    from ..defs import dbt\n"
        "importlib.import_module('dpone_dagster.defs.release.operations')\n"
        "from dpone_dagster.release.services import ReleasePlatform\n"
        "DEFAULT = 'dpone_dagster.definitions'\n",
        encoding="utf-8",
    )
    lines = sorted({hit.split(":")[1] for hit in location_imports(sample)})
    assert lines == ["1", "2", "3", "5", "6"]


def test_importing_every_command_loads_no_module_of_the_code_location():
    code = (
        "import sys\n"
        "from dpone_dagster.cli import app, demo, dev, fork, fork_promotion, lake, location, release\n"
        "print(sorted(m for m in sys.modules if m.startswith(('dpone_dagster.defs', 'dpone_dagster.definitions'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
