"""Where a fork's DuckDB catalog file lives: in a folder of its own beside the parent's catalog.

A fork incarnation on a DuckDB-file catalog gets `<stem>/<stem>.ducklake` (`naming.fork_catalog_file`)
next to the parent's `main.ducklake`: the kernel confinement of a fork's processes
(`dpone_dagster.confinement`) grants that folder, where DuckDB creates and deletes the catalog's
`.wal`, and nothing of the parent's. A rule covers a whole directory tree, so a fork catalog in the
parent's own folder could not be made writable alone.

What a reader could get wrong: forks whose catalog was created *before* folders keep their file
beside the parent's (`<stem>.ducklake`); the file's existence decides, so every process of such a
fork (resolution, drop, ancestors' attaches) finds the same file. Such a fork cannot be confined;
dropping and creating it again gives the new incarnation a folder (docs/forks.md). The folder is
made by `lake/state/registry.py: prepare_catalog_folder`, right after the place is registered
(`naming.is_own_folder` tells a folder of its own).
"""

from __future__ import annotations

from pathlib import Path

from dpone_dagster.lake.resolution.attach import CatalogLocation
from dpone_dagster.lake.resolution.naming import fork_catalog_file, legacy_fork_catalog_file


def fork_catalog_location(base: CatalogLocation, stem: str) -> CatalogLocation:
    """The catalog file of fork namespace `stem` whose parent's DuckDB catalog is `base`."""
    legacy = legacy_fork_catalog_file(base.target, stem)
    return CatalogLocation("duckdb", legacy if Path(legacy).exists() else fork_catalog_file(base.target, stem))
