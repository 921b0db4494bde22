"""What a warm run worker's loaded code depends on, and whether it changed since the worker loaded.

A warm worker (`integration/warm/worker.py`) imported its code location before the run it executes
was launched. `CodeFingerprint.take()` records, when the worker finished loading, every Python file
it imported (path, modification time in ns, size) and the dbt project's *shape*;
`changed_since(taken)` answers which of them changed. A changed one makes the worker stale: the
launcher then takes the default path (`warm.code_stale`), whose run worker imports the code again.

The dbt shape is what a code location's definitions are built from besides the manifest: the
project-level files (`dbt_project.yml`, `profiles.yml`, `packages.yml`, `dependencies.yml`,
`selectors.yml`), every YAML file under the source folders, and the *set* of source files (a model
added, removed or renamed).

What a reader could get wrong: a model's SQL (or a macro, a seed) edited in place does NOT make a
worker stale, on purpose. A cold run worker would not load it either: run workers load the manifest
prepared before the edit and never re-parse while loading (`integration/dbt/project.py`), and the dbt
op's read set then comes from the manifest its own `dbt build` parses (`lake/dbt_plugin.py`) while dbt
runs the edited SQL. So the edit a developer makes before every run stays on the warm path, while an edit
that changes the asset graph's inputs (YAML, a new model, any Python) takes the default one.
Modification times are trusted: a tool that rewrites a file and restores its mtime and size is not seen.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

_DBT_PROJECT_FILES = ("dbt_project.yml", "profiles.yml", "packages.yml", "dependencies.yml", "selectors.yml")
_DBT_SOURCE_DIRS = ("models", "macros", "tests", "seeds", "snapshots", "analyses")
_YAML = (".yml", ".yaml")
Stamp = tuple[int, int] | None  # (mtime_ns, size); None: the file does not exist


def _stamp(path: str) -> Stamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_mtime_ns, found.st_size)


def imported_python_files(modules: Iterable[object] | None = None) -> list[str]:
    """The source (or extension) file of every module imported in this process."""
    files = set()
    for module in list(sys.modules.values()) if modules is None else modules:
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith((".py", ".so", ".pyd")):
            files.add(path)
    return sorted(files)


def dbt_shape(project_dir: Path | None) -> dict[str, Stamp]:
    """The dbt files the definitions' asset graph depends on (see the module docstring): project files
    and YAML stamped, every other source file by its presence alone (stamp (0, 0))."""
    if project_dir is None or not project_dir.is_dir():
        return {}
    shape: dict[str, Stamp] = {name: _stamp(str(project_dir / name)) for name in _DBT_PROJECT_FILES}
    for folder in _DBT_SOURCE_DIRS:
        for path in (project_dir / folder).rglob("*"):
            if path.is_file():
                relative = path.relative_to(project_dir).as_posix()
                shape[relative] = _stamp(str(path)) if path.suffix in _YAML else (0, 0)
    return shape


@dataclass(frozen=True)
class CodeFingerprint:
    """The Python files a process imported and its dbt project's shape, as they were when taken."""

    python: Mapping[str, Stamp]
    dbt_project: Path | None
    dbt: Mapping[str, Stamp]

    @classmethod
    def take(cls, dbt_project: Path | None, modules: Iterable[object] | None = None) -> CodeFingerprint:
        python = {path: _stamp(path) for path in imported_python_files(modules)}
        return cls(python=python, dbt_project=dbt_project, dbt=dbt_shape(dbt_project))

    def changed_file(self) -> str | None:
        """The name of one file that changed since this fingerprint was taken (None: nothing did).
        A Python file is named by its file name, a dbt file by its path inside the dbt project."""
        for path, stamp in self.python.items():
            if _stamp(path) != stamp:
                return Path(path).name
        now = dbt_shape(self.dbt_project)
        for relative in sorted(set(now) | set(self.dbt)):
            if now.get(relative, "gone") != self.dbt.get(relative, "gone"):
                return relative
        return None
