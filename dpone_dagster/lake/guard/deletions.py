"""Before DuckLake maintenance runs on a connection's own lake: every file it could delete is the lake's own.

DuckLake deletes what its catalog lists: `ducklake_cleanup_old_files` the paths in
`ducklake_files_scheduled_for_deletion`, `ducklake_expire_snapshots` (and `CHECKPOINT`, which runs
expire, merge, rewrite and cleanup) the data and delete files of expired snapshots, and
`ducklake_delete_orphaned_files` whatever lies under the catalog's `data_path`. Issue 19 #3 planted a
parent's file in the fork's own deletion list and had the fork's cleanup delete it. User SQL cannot
write the metadata catalog any more (`lake.metadata_write`), and as a second line
`verify_own_deletions` reads those lists right before the maintenance statement runs and refuses it
(`lake.cleanup_outside_namespace`) unless every path is provably the lake's own: the catalog's
`data_path` is the connection's data path, relative paths stay below it (no `..`, no absolute or
URL form), and absolute paths lie inside it.

What a reader could get wrong: the check reads the catalog in the same session and statement order
as the maintenance that follows, so nothing user SQL can do sits between them; it is only as good as
the metadata schema it reads, which is why the schema comes from the resolved attach itself (the
fork's own namespace, or the `METADATA_SCHEMA` / `METADATA_CATALOG` its ATTACH names).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpone_dagster.lake.guard.lexer import SqlGuardError
from dpone_dagster.lake.guard.paths import FileRules, FileWriteOutsideNamespaceError, write_root
from dpone_dagster.lake.guard.statement import quote_ident

if TYPE_CHECKING:
    from dpone_dagster.lake.resolution.apply import ResolvedLake


class CleanupOutsideNamespaceError(SqlGuardError):
    code = "lake.cleanup_outside_namespace"


_OPTION = r"{name} '((?:[^']|'')*)'"
_SUSPICIOUS_RELATIVE = "path LIKE '/%' OR path LIKE '%..%' OR path LIKE '%://%' OR path LIKE '~%' OR path LIKE 'file:%'"
_PATHS_SQL = """
SELECT path, path_is_relative FROM {m}.ducklake_files_scheduled_for_deletion
  WHERE NOT path_is_relative OR {bad}
UNION ALL SELECT path, path_is_relative FROM {m}.ducklake_data_file WHERE NOT path_is_relative OR {bad}
UNION ALL SELECT path, path_is_relative FROM {m}.ducklake_delete_file WHERE NOT path_is_relative OR {bad}
UNION ALL SELECT path, path_is_relative FROM {m}.ducklake_schema WHERE NOT path_is_relative OR {bad}
UNION ALL SELECT path, path_is_relative FROM {m}.ducklake_table WHERE NOT path_is_relative OR {bad}
UNION ALL SELECT value, false FROM {m}.ducklake_metadata WHERE key = 'data_path'
"""


def _option(rendered: str, name: str) -> str | None:
    found = re.search(_OPTION.format(name=name), rendered)
    return found.group(1).replace("''", "'") if found else None


@dataclass(frozen=True)
class OwnLake:
    """Where the connection's own lake keeps its catalog tables, and its data path."""

    catalog: str  # the metadata catalog DuckLake attached for the lake
    schema: str
    data_path: str

    @classmethod
    def for_lake(cls, resolved: ResolvedLake) -> OwnLake:
        attach = resolved.target.render()  # redacted: options only, never a credential
        catalog = (
            resolved.metadata_catalog
            or _option(attach, "METADATA_CATALOG")
            or (f"__ducklake_metadata_{resolved.alias}")
        )
        default = "public" if resolved.catalog.kind == "postgres" else "main"
        return cls(catalog, _option(attach, "METADATA_SCHEMA") or default, resolved.data_path)

    @property
    def metadata(self) -> str:
        """`<catalog>.<schema>`, quoted for SQL."""
        return f"{quote_ident(self.catalog)}.{quote_ident(self.schema)}"


def verify_own_deletions(own: OwnLake, fetch: Callable[[str], list[tuple]]) -> None:
    """Refuse unless every file DuckLake maintenance could delete is below `own.data_path`.
    `fetch(sql)` runs a query on the connection that is about to run the maintenance."""
    try:
        rows = fetch(_PATHS_SQL.format(m=own.metadata, bad=_SUSPICIOUS_RELATIVE))
    except Exception:
        raise CleanupOutsideNamespaceError(
            "the lake's own file lists could not be read, so its maintenance is refused"
        ) from None
    rules = FileRules((write_root(own.data_path),))
    for path, relative in rows:
        try:
            if relative:
                raise FileWriteOutsideNamespaceError("a relative path leaves the data path")
            rules.check_write(path, "a file DuckLake would delete")
        except FileWriteOutsideNamespaceError:
            raise CleanupOutsideNamespaceError(
                "the lake's catalog lists a file outside its own data path; its maintenance "
                "(cleanup, expire, checkpoint, merge, rewrite) is refused"
            ) from None
