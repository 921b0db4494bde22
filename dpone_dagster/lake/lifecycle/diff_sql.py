"""The SQL half of a fork diff: one table against another, in one DuckDB session.

`compare_tables` reads two attached tables (the fork's, and the nearest owner's through its
READ_ONLY attach) and returns their schema changes, row counts and, given a key, rows added,
removed and changed with a bounded, key-ordered sample. `table_version` is the snapshot id at which
a DuckLake table last changed, read from the lake's own snapshot log.

What a reader could get wrong: a "changed" row is one whose key is on both sides and where any
column present on both sides differs (`IS DISTINCT FROM`, so NULL = NULL); a column whose type
changed compares the parent's value cast to the fork's type (a value that cannot be cast differs).
Added or removed *columns* never make a row "changed": they are reported once, as schema changes. A
key must be unique on both sides, else the diff is refused (`fork.diff_key_not_unique`) rather than
counting a join's fan-out as changes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import quote_ident
from dpone_dagster.lake.resolution.plan import TableName

MAX_SAFE_INTEGER = 2**53 - 1
_ID_KEYS = (
    "tables_inserted_into",
    "tables_deleted_from",
    "tables_altered",
    "tables_dropped",
    "inlined_insert",
    "inlined_delete",
)
_MARK = "__dpone_diff_in"


class DiffKeyError(LakeError):
    code = "fork.diff_key_invalid"


class DiffKeyNotUniqueError(LakeError):
    code = "fork.diff_key_not_unique"


@dataclass(frozen=True)
class Compared:
    """What `compare_tables` found; row fields are None without a key (or without a parent)."""

    parent_rows: int | None
    fork_rows: int
    added_columns: tuple[tuple[str, str], ...]
    removed_columns: tuple[tuple[str, str], ...]
    type_changed: tuple[tuple[str, str, str], ...]
    rows_added: int | None = None
    rows_removed: int | None = None
    rows_changed: int | None = None
    sample: dict | None = None


def json_value(value: object) -> object:
    """A value as canonical JSON can carry it: big integers, decimals, dates and the rest as text."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_SAFE_INTEGER else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def columns_of(conn, alias: str, name: TableName) -> list[tuple[str, str]]:
    """(column, type) of one attached table, in order (`DESCRIBE`: no information_schema scan)."""
    return [(str(r[0]), str(r[1])) for r in conn.execute(f"DESCRIBE {name.qualified(alias)}").fetchall()]


class TableVersions:
    """`table_version` for many tables of a session, reading each lake's snapshot log once.

    Only for reads that happen before the session writes: the log is cached as first read."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self._ids: dict[str, dict[str, list[str]]] = {}
        self._log: dict[str, list[tuple[int, dict]]] = {}

    def _table_ids(self, alias: str) -> dict[str, list[str]]:
        if alias not in self._ids:
            out: dict[str, list[str]] = {}
            for table, table_id in self.conn.execute(
                "SELECT table_name, table_id FROM ducklake_table_info(?)", [alias]
            ).fetchall():
                out.setdefault(str(table), []).append(str(table_id))
            self._ids[alias] = out
        return self._ids[alias]

    def _snapshots(self, alias: str) -> list[tuple[int, dict]]:
        if alias not in self._log:
            rows = self.conn.execute(f"SELECT snapshot_id, changes FROM {quote_ident(alias)}.snapshots()").fetchall()
            self._log[alias] = [(int(snapshot), dict(changes or {})) for snapshot, changes in rows]
        return self._log[alias]

    def __call__(self, alias: str, name: TableName) -> int | None:
        """The latest snapshot of the lake attached as `alias` that created or changed `name`.

        From `snapshots()`: the ids DuckLake lists under inserts, deletes, alters, drops and inlined
        changes, and the `schema.table` it lists as created. Tables of the same name in other
        schemas count too (never a missed change, at worst a false one). None: no such table."""
        ids = set(self._table_ids(alias).get(name.table, ()))
        if not ids:
            return None
        created = f"{name.schema}.{name.table}"
        latest = None
        for snapshot, changes in self._snapshots(alias):
            touched = any(ids.intersection(changes.get(key) or ()) for key in _ID_KEYS)
            if touched or created in (changes.get("tables_created") or ()):
                latest = snapshot if latest is None else max(latest, snapshot)
        return latest


def table_version(conn, alias: str, name: TableName) -> int | None:
    """`TableVersions` for one table (see there)."""
    return TableVersions(conn)(alias, name)


def _count(conn, ref: str, key: Sequence[str] | None = None) -> tuple[int, int]:
    """(rows, distinct key values) of `ref`; without a key both are the row count."""
    if not key:
        n = int(conn.execute(f"SELECT count(*) FROM {ref}").fetchone()[0])
        return n, n
    cols = ", ".join(quote_ident(k) for k in key)
    n, distinct = conn.execute(f"SELECT count(*), count(DISTINCT row({cols})) FROM {ref}").fetchone()
    return int(n), int(distinct)


def _require_unique(counts: tuple[int, int], key: Sequence[str], side: str, name: TableName) -> None:
    rows, distinct = counts
    if rows != distinct:
        raise DiffKeyNotUniqueError(
            f"key ({', '.join(key)}) is not unique in the {side}'s {name} ({rows - distinct} duplicate "
            "row(s)); pass another --key"
        )


def compare_tables(
    conn,
    fork_alias: str,
    parent_alias: str | None,
    name: TableName,
    key: Sequence[str] | None,
    cap: int,
) -> Compared:
    """Compare `name` in the fork's attach with `name` in the owner's (None: no owner has it)."""
    fork_ref = name.qualified(fork_alias)
    fork_cols = columns_of(conn, fork_alias, name)
    parent_cols = columns_of(conn, parent_alias, name) if parent_alias else []
    fork_types, parent_types = dict(fork_cols), dict(parent_cols)
    added = tuple((c, t) for c, t in fork_cols if c not in parent_types)
    removed = tuple((c, t) for c, t in parent_cols if c not in fork_types)
    changed = tuple((c, parent_types[c], t) for c, t in fork_cols if c in parent_types and parent_types[c] != t)
    missing = [k for k in key or () if k not in fork_types or (parent_alias and k not in parent_types)]
    if missing:
        raise DiffKeyError(f"key column(s) {', '.join(missing)} not on both sides of {name}")
    fork_counts = _count(conn, fork_ref, key)
    if parent_alias is None:
        return Compared(None, fork_counts[0], added, removed, changed)
    parent_ref = name.qualified(parent_alias)
    parent_counts = _count(conn, parent_ref, key)
    base = Compared(parent_counts[0], fork_counts[0], added, removed, changed)
    if not key:
        return base
    _require_unique(fork_counts, key, "fork", name)
    _require_unique(parent_counts, key, "parent", name)
    compared = [c for c, _ in fork_cols if c in parent_types and c not in key]
    retyped = {c: t for c, _, t in changed}
    return _rows(conn, fork_ref, parent_ref, list(key), compared, retyped, cap, base)


def _rows(conn, fork_ref, parent_ref, key, compared, retyped, cap, base: Compared) -> Compared:
    q = quote_ident
    on = " AND ".join(f"f.{q(k)} IS NOT DISTINCT FROM p.{q(k)}" for k in key)

    def flag(col: str) -> str:
        f, p = f"f.{q(col)}", f"p.{q(col)}"
        if col not in retyped:
            return f"({f} IS DISTINCT FROM {p})"
        cast = f"TRY_CAST({p} AS {retyped[col]})"  # the parent's value in the fork's type
        return f"(CASE WHEN {p} IS NOT NULL AND {cast} IS NULL THEN true ELSE {cast} IS DISTINCT FROM {f} END)"

    flags = [flag(c) for c in compared]
    any_diff = " OR ".join(flags) or "false"
    kind = (
        f"CASE WHEN p.{_MARK} IS NULL THEN 'added' WHEN f.{_MARK} IS NULL THEN 'removed' "
        f"WHEN {any_diff} THEN 'changed' ELSE 'same' END"
    )
    keys = ", ".join(f"coalesce(f.{q(k)}, p.{q(k)}) AS {q('k_' + str(i))}" for i, k in enumerate(key))
    values = ", ".join(
        f"{flag} AS {q('d_' + str(i))}, f.{q(c)} AS {q('f_' + str(i))}, p.{q(c)} AS {q('p_' + str(i))}"
        for i, (c, flag) in enumerate(zip(compared, flags))
    )
    joined = (
        f"WITH f AS (SELECT *, true AS {_MARK} FROM {fork_ref}), p AS (SELECT *, true AS {_MARK} FROM {parent_ref}), "
        f"j AS (SELECT {kind} AS kind, {keys}{', ' + values if values else ''} FROM f FULL OUTER JOIN p ON {on}) "
    )
    counts = dict(conn.execute(joined + "SELECT kind, count(*) FROM j GROUP BY kind").fetchall())
    order = ", ".join(f"{q('k_' + str(i))} NULLS FIRST" for i in range(len(key)))
    key_cols = ", ".join(q("k_" + str(i)) for i in range(len(key)))
    sample: dict[str, list] = {}
    for which in ("added", "removed"):
        rows = conn.execute(
            joined + f"SELECT {key_cols} FROM j WHERE kind = '{which}' ORDER BY {order} LIMIT {int(cap)}"
        ).fetchall()
        sample[which] = [dict(zip(key, map(json_value, row))) for row in rows]
    sample["changed"] = []
    if compared:
        cols = ", ".join(f"{q('d_' + str(i))}, {q('f_' + str(i))}, {q('p_' + str(i))}" for i in range(len(compared)))
        rows = conn.execute(
            joined + f"SELECT {key_cols}, {cols} FROM j WHERE kind = 'changed' ORDER BY {order} LIMIT {int(cap)}"
        ).fetchall()
        for row in rows:
            at = len(key)
            diffs = {}
            for i, col in enumerate(compared):
                flag, fork_value, parent_value = row[at + 3 * i : at + 3 * i + 3]
                if flag:
                    diffs[col] = {"parent": json_value(parent_value), "fork": json_value(fork_value)}
            sample["changed"].append({"key": dict(zip(key, map(json_value, row[:at]))), "columns": diffs})
    return Compared(
        base.parent_rows,
        base.fork_rows,
        base.added_columns,
        base.removed_columns,
        base.type_changed,
        rows_added=int(counts.get("added", 0)),
        rows_removed=int(counts.get("removed", 0)),
        rows_changed=int(counts.get("changed", 0)),
        sample=sample,
    )


def change_counts(conn, alias: str, name: TableName, start: int, end: int) -> dict[str, int]:
    """DuckLake's change feed of `name` between two snapshots (exclusive of `start`), counted by
    change type (`insert`, `delete`, `update_preimage`, `update_postimage`)."""
    rows = conn.execute(
        "SELECT change_type, count(*) FROM ducklake_table_changes(?, ?, ?, ?, ?) GROUP BY 1 ORDER BY 1",
        [alias, name.schema, name.table, start + 1, end],
    ).fetchall()
    return {str(kind): int(n) for kind, n in rows}
