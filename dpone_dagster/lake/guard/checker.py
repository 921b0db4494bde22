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
  statement type not on the allowed list (IMPORT DATABASE included).

What a reader could get wrong: this is a guard on the SQL paths the project runs (the
`GuardedConnection` of `DuckLakeResource.connect`, `dpone lake sql --execute`, every SQL dbt
sends), not a sandbox: user *Python* can open its own DuckDB connection. Writes into an ancestor
through INSERT/UPDATE/DELETE/COPY FROM DATABASE or into its `__ducklake_metadata_*` catalog need no
rule here: DuckDB refuses them at bind time because the ancestor is attached READ_ONLY (tested).
The maintenance functions are different — DuckLake 1.5.5 does their file I/O *before* its
READ_ONLY check — which is why they are refused by name, in every spelling DuckDB resolves
(`ducklake_x('a')`, `a.x()`, `a.main.x()`, and `x()` after `USE a`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpone_dagster.lake.guard.lexer import (
    SqlGuardError,
    Token,
    UnparsableSqlError,
    split_statements,
    statement_types,
    tokens,
)

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
)  # fmt: skip
"""A setting whose name contains one of these is refused in SET / RESET / PRAGMA."""

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
    """The rules for one connection: its own lake alias, whether it is a fork, its ancestors."""

    alias: str
    fork_mode: bool
    foreign: frozenset[str] = frozenset()  # ancestor aliases and metadata catalogs (lowercase)

    @classmethod
    def for_lake(cls, resolved: ResolvedLake) -> SqlGuard:
        foreign = {a.alias.lower() for a in resolved.ancestors}
        foreign |= {f"__ducklake_metadata_{a}" for a in foreign}
        return cls(resolved.alias.lower(), bool(resolved.fork_mode), frozenset(foreign))

    def check(self, sql: str) -> None:
        if not isinstance(sql, str):
            raise UnparsableSqlError("only SQL text can be checked")
        types = statement_types(sql)
        for group in split_statements(tokens(sql)):
            self._statement(group)
            self._calls(group)
        for kind in types:
            self._statement_type(kind)

    def check_fragment(self, text: str) -> None:
        """An expression or name handed to a relation method: call sites only (no statement)."""
        self._calls(tokens(text))

    def check_function_name(self, name: str) -> None:
        """`conn.table_function(name, …)`: refuse every guarded function, whatever the arguments."""
        word = Token("identifier", name).word.rsplit(".", 1)[-1]
        base = word.removeprefix("ducklake_")
        if word in DYNAMIC_SQL_FUNCTIONS:
            raise DynamicSqlError(f"{word}() runs SQL this guard cannot see; it is refused")
        if word in CHECKPOINT_FUNCTIONS or base in DUCKLAKE_MAINTENANCE or (
            word.startswith("ducklake_") and base not in DUCKLAKE_READ_ONLY
        ):
            raise AncestorMaintenanceError(f"{word}() is refused through table_function; use SQL")

    # -- statements ------------------------------------------------------------------------

    def _statement_type(self, kind: str) -> None:
        if kind in ("ATTACH", "DETACH"):
            raise UnmanagedAttachError(
                f"{kind} is refused: lakes are attached only through the workspace's resolution"
            )
        if kind in ("LOAD", "EXTENSION"):
            raise ExtensionStatementError("LOAD / INSTALL / UPDATE EXTENSIONS are refused in user SQL")
        if kind not in _ALLOWED_TYPES:
            raise UnsupportedStatementError(f"statements of type {kind} are refused in user SQL")

    def _statement(self, group: list[Token]) -> None:
        i = 0
        while i < len(group) and (group[i].is_op("(") or group[i].text.upper() in _PREFIX_WORDS):
            i += 1
        if i >= len(group):
            return
        head = group[i].text.upper() if group[i].kind == "keyword" else ""
        rest = group[i + 1 :]
        if head in ("ATTACH", "DETACH"):
            self._statement_type(head)
        elif head in ("LOAD", "INSTALL") or (head == "UPDATE" and rest and rest[0].word == "extensions"):
            self._statement_type("LOAD")
        elif head == "IMPORT":
            raise UnsupportedStatementError("IMPORT DATABASE runs SQL from files; it is refused")
        elif head == "CHECKPOINT":
            self._checkpoint(rest)
        elif head == "USE":
            self._use(rest)
        elif head in ("SET", "RESET"):
            self._set(rest)
        elif head == "PRAGMA":
            self._pragma(rest)

    def _checkpoint(self, rest: list[Token]) -> None:
        if not rest:
            if self.fork_mode:
                raise AncestorMaintenanceError(
                    "a bare CHECKPOINT in a fork checkpoints every attached lake, ancestors "
                    f"included; name the fork's own lake: CHECKPOINT {self.alias}"
                )
            return
        if len(rest) == 1 and rest[0].kind == "identifier" and rest[0].word == self.alias:
            return
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

    # -- call sites ------------------------------------------------------------------------

    def _is_foreign(self, catalog: str) -> bool:
        return catalog in self.foreign or catalog.startswith(_FOREIGN_CATALOG_PREFIXES)

    def _calls(self, group: list[Token]) -> None:
        for index, token in enumerate(group):
            if not token.is_name or index + 1 >= len(group) or not group[index + 1].is_op("("):
                continue
            qualifiers: list[Token] = []
            j = index - 1
            while j >= 1 and group[j].is_op("."):
                qualifiers.insert(0, group[j - 1])
                j -= 2
            self._call(token.word, qualifiers, group[index + 2 :])

    def _call(self, name: str, qualifiers: list[Token], args: list[Token]) -> None:
        base = name.removeprefix("ducklake_")
        if name in DYNAMIC_SQL_FUNCTIONS:
            raise DynamicSqlError(f"{name}() runs SQL this guard cannot see; it is refused")
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
                return
            self._own_literal(name, args)
        elif name.startswith("ducklake_") and base in DUCKLAKE_READ_ONLY:
            return
        elif name.startswith("ducklake_"):
            if qualifiers:
                raise AncestorMaintenanceError(f"{name}() must not be qualified")
            self._own_literal(name, args)
        elif base in DUCKLAKE_MAINTENANCE:
            own = (
                len(qualifiers) == 1
                and qualifiers[0].kind == "identifier"
                and qualifiers[0].word == self.alias
            )
            if not own:
                raise AncestorMaintenanceError(
                    f"{name}() is DuckLake maintenance; it runs only on this connection's lake, "
                    f"written {self.alias}.{name}()"
                )
        elif qualified_foreign and base not in DUCKLAKE_READ_ONLY:
            raise AncestorMaintenanceError(
                f"{name}() on an ancestor's catalog is refused (only read-only DuckLake functions)"
            )

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
    connection `resolved` describes. Returns None when the SQL may run unchanged."""
    SqlGuard.for_lake(resolved).check(sql)
