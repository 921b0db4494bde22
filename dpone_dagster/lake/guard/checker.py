"""`guard_sql`: the one check every SQL text the project runs for user code passes first.

Built on DuckDB's own parser (`extract_statements`, for the statement types) and its own lexer
(`duckdb.tokenize`, for names, literals and call sites; both wrapped in `sql_lexer.py`), never on
a regex: `$$…$$`, `$x$…$x$`, `E'…'`, comments, case and statement separators are whatever DuckDB
says they are.

Refused, with a typed code (`SqlGuardError` subclasses):
- `lake.unmanaged_attach` — any ATTACH or DETACH, in a fork and in prod: lakes are attached only
  through `resolve()`;
- `lake.unmanaged_use` — `USE` of an ancestor or of a DuckLake metadata catalog;
- `lake.ancestor_maintenance` — a DuckLake write/maintenance function, `CHECKPOINT`/`checkpoint()`,
  unless its catalog is the connection's own alias written as a plain `'…'` literal (or, for the
  `<alias>.merge_adjacent_files()` shorthand, the own alias as qualifier); bare CHECKPOINT in a fork;
  `add_data_files` in a fork at all (the fork's cleanup would later delete the registered file);
- `lake.dynamic_sql` — functions that run SQL given as a string (`query`, `postgres_execute`, …);
- `lake.extension_statement` — LOAD / INSTALL / UPDATE EXTENSIONS;
- `lake.guarded_setting` — SET / RESET / PRAGMA of a security-relevant setting, and any PRAGMA
  that is neither a setting nor a known read-only one;
- `lake.sql_unparsable` / `lake.unsupported_statement` — anything DuckDB cannot parse, or a
  statement type not on the allowed list (IMPORT DATABASE included);
- `lake.file_write_outside_namespace` — `COPY … TO` / `EXPORT DATABASE` whose target is not provably
  inside the lake's own data path or the temp folder (`writes.py`, `paths.py`), persistent secrets;
- `lake.metadata_write` — any statement but a query that names a `__ducklake_metadata_*` catalog
  (the fork's own included: its deletion list decides what cleanup deletes); `SET search_path` to one;
- `lake.foreign_database` — table functions off the allowlist (`functions.py`: `postgres_scan`,
  `read_duckdb`, `sqlite_*`, …) and paths naming a database or catalog file.
Maintenance on the own lake is allowed, and reported by `check()` so that `GuardedConnection`
first verifies every file it could delete is the lake's own (`deletions.py`).

What a reader could get wrong: this is a guard on the SQL paths the project runs (the
`GuardedConnection` of `DuckLakeResource.connect`, `dpone lake sql --execute`, every SQL dbt
sends), not a sandbox: user *Python* can open its own DuckDB connection (kernel confinement, not
this guard, is the line there). Writes into an ancestor
through INSERT/UPDATE/DELETE/COPY FROM DATABASE or into its `__ducklake_metadata_*` catalog need no
rule here: DuckDB refuses them at bind time because the ancestor is attached READ_ONLY (tested).
The maintenance functions are different — DuckLake 1.5.5 does their file I/O *before* its
READ_ONLY check — which is why they are refused by name, in every spelling DuckDB resolves
(`ducklake_x('a')`, `a.x()`, `a.main.x()`, and `x()` after `USE a`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpone_dagster.lake.guard.deletions import OwnLake
from dpone_dagster.lake.guard.functions import READ_FUNCTIONS, check_table_function
from dpone_dagster.lake.guard.lexer import (
    SqlGuardError,
    Token,
    UnparsableSqlError,
    split_statements,
    statement_types,
    tokens,
)
from dpone_dagster.lake.guard.paths import FileRules
from dpone_dagster.lake.guard.writes import check_file_tokens, check_read_arguments, check_read_tokens

if TYPE_CHECKING:
    from dpone_dagster.lake.resolution.apply import ResolvedLake


class UnmanagedAttachError(SqlGuardError):
    code = "lake.unmanaged_attach"


class UnmanagedUseError(SqlGuardError):
    code = "lake.unmanaged_use"


class AncestorMaintenanceError(SqlGuardError):
    code = "lake.ancestor_maintenance"


class DynamicSqlError(SqlGuardError):
    code = "lake.dynamic_sql"


class ExtensionStatementError(SqlGuardError):
    code = "lake.extension_statement"


class GuardedSettingError(SqlGuardError):
    code = "lake.guarded_setting"


class UnsupportedStatementError(SqlGuardError):
    code = "lake.unsupported_statement"


class MetadataWriteError(SqlGuardError):
    code = "lake.metadata_write"


DUCKLAKE_READ_ONLY = frozenset(
    {
        "current_snapshot", "last_committed_snapshot", "list_files", "options", "scan",
        "settings", "snapshots", "table_changes", "table_deletions", "table_info",
        "table_insertions",
    }
)  # fmt: skip
"""`ducklake_<name>` functions that only read. Every other `ducklake_*` function is maintenance."""

DUCKLAKE_MAINTENANCE = frozenset(
    {
        "add_data_files", "cleanup_old_files", "commit", "delete_orphaned_files",
        "expire_snapshots", "flush_inlined_data", "merge_adjacent_files", "rewrite_data_files",
        "set_commit_message", "set_option",
    }
)  # fmt: skip
"""The DuckLake 1.5.5 functions that write (tests compare both sets with `duckdb_functions()`)."""

CHECKPOINT_FUNCTIONS = frozenset({"checkpoint", "force_checkpoint"})

DYNAMIC_SQL_FUNCTIONS = frozenset(
    {
        "query", "query_table", "json_execute_serialized_sql", "import_database",
        "copy_database", "postgres_execute", "postgres_query", "postgres_attach",
        "postgres_configure_pool", "sqlite_attach", "mysql_execute", "mysql_query",
    }
)  # fmt: skip
"""Functions that run SQL handed over as a string (which this guard cannot see) or attach."""

GUARDED_SETTING_WORDS = (
    "extension", "external_access", "allowed_", "allow_", "autoload", "autoinstall",
    "lock_configuration", "secret", "unsigned", "community", "disabled_filesystems",
    # settings that name a file or folder DuckDB writes (query log, profile, spill, logs)
    "_path", "directory", "directories", "_output", "logging", "log_", "profil",
)  # fmt: skip
"""A setting whose name contains one of these is refused in SET / RESET / PRAGMA."""

NAME_RESOLUTION_SETTINGS = frozenset({"search_path", "schema"})
"""Settings that decide where unqualified names resolve: refused when they name a guarded catalog."""

READ_ONLY_PRAGMAS = frozenset(
    {
        "collations", "database_list", "database_size", "functions", "metadata_info",
        "platform", "show", "show_databases", "show_tables", "show_tables_expanded",
        "storage_info", "table_info", "user_agent", "version",
    }
)  # fmt: skip

_ALLOWED_TYPES = frozenset(
    {
        "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE_INTO", "CREATE", "DROP", "ALTER",
        "TRANSACTION", "COPY", "COPY_DATABASE", "EXPLAIN", "PREPARE", "EXECUTE", "CALL", "SET",
        "VARIABLE_SET", "PRAGMA", "VACUUM", "EXPORT", "ANALYZE",
    }
)  # fmt: skip
_SCOPE_WORDS = frozenset({"GLOBAL", "SESSION", "LOCAL"})
_PREFIX_WORDS = frozenset({"EXPLAIN", "ANALYZE", "FORCE"})
_FOREIGN_CATALOG_PREFIXES = ("__wm_dl_", "__ducklake_metadata_")


@dataclass(frozen=True)
class SqlGuard:
    """The rules for one connection: its own lake alias, whether it is a fork, its ancestors,
    where it may write files, and where its own catalog tables are (see module docstring)."""

    alias: str
    fork_mode: bool
    foreign: frozenset[str] = frozenset()  # ancestor aliases and metadata catalogs (lowercase)
    files: FileRules = FileRules()  # default: no file may be written
    metadata: frozenset[str] = frozenset()  # the own lake's metadata catalog when not `__ducklake_metadata_*`
    own: OwnLake | None = None

    @classmethod
    def for_lake(cls, resolved: ResolvedLake) -> SqlGuard:
        from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, split_storage_root

        foreign = {a.alias.lower() for a in resolved.ancestors}
        foreign |= {f"__ducklake_metadata_{a}" for a in foreign}
        catalogs = [c.target for c in (resolved.catalog, resolved.base_catalog) if c.kind in ("duckdb", "sqlite")]
        marker = f"/{FORK_DATA_DIR}/"
        storage_root = (
            resolved.data_path.split(marker, 1)[0] if marker in resolved.data_path
            else split_storage_root(resolved.data_path)[0]
        )  # fmt: skip
        own = OwnLake.for_lake(resolved)
        return cls(
            resolved.alias.lower(),
            bool(resolved.fork_mode),
            frozenset(foreign),
            FileRules.for_lake(resolved.data_path, catalogs, storage_root),
            frozenset({own.catalog.lower()}),
            own,
        )

    def check(self, sql: str) -> bool:
        """Refuse `sql` (a typed `SqlGuardError`) unless every statement in it is allowed. Returns
        True when it runs DuckLake maintenance (or a CHECKPOINT) on the own lake: the caller must
        then `verify_own_deletions` on the connection before running it."""
        if not isinstance(sql, str):
            raise UnparsableSqlError("only SQL text can be checked")
        types = statement_types(sql)
        groups = split_statements(tokens(sql))
        lowered = sql.lower()  # a metadata catalog's name is in the text when a token names it
        names_metadata = "__ducklake_metadata_" in lowered or any(m in lowered for m in self.metadata)
        maintains = False
        for index, group in enumerate(groups):
            maintains |= self._statement(group)
            maintains |= self._calls(group)
            if names_metadata:
                self._metadata_write(group, types[index] if len(types) == len(groups) else "UNALIGNED")
            check_file_tokens(group, self.files)
            check_read_tokens(group, self.files)
        for kind in types:
            self._statement_type(kind)
        return maintains

    def check_fragment(self, text: str) -> None:
        """An expression or name handed to a relation method: call sites only (no statement)."""
        group = tokens(text)
        self._calls(group)
        check_read_tokens(group, self.files)

    def check_table_name(self, name: str) -> None:
        """A table or view a relation method writes or creates (`to_table`, `insert_into`, `append`):
        never in a metadata catalog (ancestors refuse writes themselves: READ_ONLY)."""
        self._metadata_write(tokens(name), "INSERT")

    def check_function_name(self, name: str) -> None:
        """`conn.table_function(name, …)`: refuse every guarded function, whatever the arguments."""
        word = Token("identifier", name).word.rsplit(".", 1)[-1]
        base = word.removeprefix("ducklake_")
        if word in DYNAMIC_SQL_FUNCTIONS:
            raise DynamicSqlError(f"{word}() runs SQL this guard cannot see; it is refused")
        if (
            word in CHECKPOINT_FUNCTIONS
            or base in DUCKLAKE_MAINTENANCE
            or (word.startswith("ducklake_") and base not in DUCKLAKE_READ_ONLY)
        ):
            raise AncestorMaintenanceError(f"{word}() is refused through table_function; use SQL")
        check_table_function(word)

    # -- statements ------------------------------------------------------------------------

    def _statement_type(self, kind: str) -> None:
        if kind in ("ATTACH", "DETACH"):
            raise UnmanagedAttachError(f"{kind} is refused: lakes are attached only through the workspace's resolution")
        if kind in ("LOAD", "EXTENSION"):
            raise ExtensionStatementError("LOAD / INSTALL / UPDATE EXTENSIONS are refused in user SQL")
        if kind not in _ALLOWED_TYPES:
            raise UnsupportedStatementError(f"statements of type {kind} are refused in user SQL")

    def _statement(self, group: list[Token]) -> bool:
        i = 0
        while i < len(group) and (group[i].is_op("(") or group[i].text.upper() in _PREFIX_WORDS):
            i += 1
        if i >= len(group):
            return False
        head = group[i].text.upper() if group[i].kind == "keyword" else ""
        rest = group[i + 1 :]
        if head in ("ATTACH", "DETACH"):
            self._statement_type(head)
        elif head in ("LOAD", "INSTALL") or (head == "UPDATE" and rest and rest[0].word == "extensions"):
            self._statement_type("LOAD")
        elif head == "IMPORT":
            raise UnsupportedStatementError("IMPORT DATABASE runs SQL from files; it is refused")
        elif head == "CHECKPOINT":
            return self._checkpoint(rest)
        elif head == "USE":
            self._use(rest)
        elif head in ("SET", "RESET"):
            self._set(rest)
        elif head == "PRAGMA":
            self._pragma(rest)
        return False

    def _checkpoint(self, rest: list[Token]) -> bool:
        if not rest:
            if self.fork_mode:
                raise AncestorMaintenanceError(
                    "a bare CHECKPOINT in a fork checkpoints every attached lake, ancestors "
                    f"included; name the fork's own lake: CHECKPOINT {self.alias}"
                )
            return True
        if len(rest) == 1 and rest[0].kind == "identifier" and rest[0].word == self.alias:
            return True
        raise AncestorMaintenanceError(f"CHECKPOINT is allowed only on this connection's lake {self.alias!r}")

    def _use(self, rest: list[Token]) -> None:
        if not rest or not rest[0].is_name:
            raise UnmanagedUseError("USE must name a catalog")
        if self._is_foreign(rest[0].word):
            raise UnmanagedUseError(f"USE of {rest[0].word!r} is refused: ancestors are read through defer views")

    def _set(self, rest: list[Token]) -> None:
        while rest and rest[0].text.upper() in _SCOPE_WORDS:
            rest = rest[1:]
        if rest and rest[0].text.upper() == "VARIABLE":
            return
        if not rest or not rest[0].is_name:
            raise GuardedSettingError("SET / RESET must name a setting")
        if rest[0].word in NAME_RESOLUTION_SETTINGS:
            named = " ".join((t.text_value() or t.word).lower() for t in rest[1:])
            if any(guarded in named for guarded in (*_FOREIGN_CATALOG_PREFIXES, *self.foreign, *self.metadata)):
                raise UnmanagedUseError(f"{rest[0].word} may not name an ancestor or a metadata catalog")
            return
        self._setting(rest[0].word)

    def _pragma(self, rest: list[Token]) -> None:
        if not rest or not rest[0].is_name:
            raise GuardedSettingError("PRAGMA must name a pragma")
        name = rest[0].word
        if len(rest) > 1 and rest[1].is_op("="):
            self._setting(name)
        elif name not in READ_ONLY_PRAGMAS:
            raise GuardedSettingError(f"PRAGMA {name} is refused in user SQL (only read-only pragmas run)")

    @staticmethod
    def _setting(name: str) -> None:
        if name == "all" or any(word in name for word in GUARDED_SETTING_WORDS):
            raise GuardedSettingError(f"setting {name!r} is fixed for this connection")

    def _metadata_write(self, group: list[Token], kind: str) -> None:
        """Only a query may name a metadata catalog: DuckLake deletes what the own one lists."""
        if kind == "SELECT":
            return
        for token in group:
            if token.is_name and (token.word.startswith("__ducklake_metadata_") or token.word in self.metadata):
                raise MetadataWriteError(
                    f"{token.word!r} is a DuckLake metadata catalog: user SQL may only query it "
                    "(DuckLake writes it; a planted row would make cleanup delete another lake's files)"
                )

    # -- call sites ------------------------------------------------------------------------

    def _is_foreign(self, catalog: str) -> bool:
        return catalog in self.foreign or catalog in self.metadata or catalog.startswith(_FOREIGN_CATALOG_PREFIXES)

    def _calls(self, group: list[Token]) -> bool:
        maintains = False
        for index, token in enumerate(group):
            if not token.is_name or index + 1 >= len(group) or not group[index + 1].is_op("("):
                continue
            qualifiers: list[Token] = []
            j = index - 1
            while j >= 1 and group[j].is_op("."):
                qualifiers.insert(0, group[j - 1])
                j -= 2
            maintains |= self._call(token.word, qualifiers, group[index + 2 :])
        return maintains

    def _call(self, name: str, qualifiers: list[Token], args: list[Token]) -> bool:
        """Refuse a guarded call; True when it is maintenance on the own lake."""
        base = name.removeprefix("ducklake_")
        if name in DYNAMIC_SQL_FUNCTIONS:
            raise DynamicSqlError(f"{name}() runs SQL this guard cannot see; it is refused")
        check_table_function(name)
        if name in READ_FUNCTIONS:
            check_read_arguments(name, args, self.files)
        qualified_foreign = bool(qualifiers) and self._is_foreign(qualifiers[0].word)
        if self.fork_mode and base == "add_data_files":
            raise AncestorMaintenanceError(
                "add_data_files is refused in a fork: a registered ancestor file would be deleted "
                "by the fork's own compaction and cleanup"
            )
        if name in CHECKPOINT_FUNCTIONS:
            if qualifiers:
                raise AncestorMaintenanceError(f"{name}() must not be qualified")
            if args and args[0].is_op(")"):
                if self.fork_mode:
                    raise AncestorMaintenanceError(
                        f"{name}() without a catalog in a fork checkpoints the ancestors too"
                    )
                return True
            self._own_literal(name, args)
            return True
        if name.startswith("ducklake_") and base in DUCKLAKE_READ_ONLY:
            return False
        if name.startswith("ducklake_"):
            if qualifiers:
                raise AncestorMaintenanceError(f"{name}() must not be qualified")
            self._own_literal(name, args)
            return True
        if base in DUCKLAKE_MAINTENANCE:
            own = len(qualifiers) == 1 and qualifiers[0].kind == "identifier" and qualifiers[0].word == self.alias
            if not own:
                raise AncestorMaintenanceError(
                    f"{name}() is DuckLake maintenance; it runs only on this connection's lake, "
                    f"written {self.alias}.{name}()"
                )
            return True
        if qualified_foreign and base not in DUCKLAKE_READ_ONLY:
            raise AncestorMaintenanceError(
                f"{name}() on an ancestor's catalog is refused (only read-only DuckLake functions)"
            )
        return False

    def _own_literal(self, name: str, args: list[Token]) -> None:
        value = args[0].plain_literal() if args else None
        ends = len(args) > 1 and (args[1].is_op(",") or args[1].is_op(")"))
        if value is None or not ends or value.lower() != self.alias:
            raise AncestorMaintenanceError(
                f"{name}() runs only on this connection's lake, named as the plain literal "
                f"'{self.alias}' first argument"
            )


def guard_sql(resolved: ResolvedLake, sql: str) -> None:
    """Refuse `sql` (a typed `SqlGuardError`) unless every statement in it is allowed for the
    connection `resolved` describes. Returns None when the SQL may run unchanged; maintenance of
    the own lake is allowed here, but only `GuardedConnection` also verifies its deletion lists."""
    SqlGuard.for_lake(resolved).check(sql)
