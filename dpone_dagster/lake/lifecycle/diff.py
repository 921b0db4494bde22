"""`dpone fork diff`: what a fork's own tables change against the tables its parent would give it.

Each fork-materialized table is compared with the table its defer view would read: the nearest
ancestor that owns it (`tracking`), attached READ_ONLY by the fork's normal resolution. A diff
reports schema changes, row counts and, by primary key (the column of the model's dbt `unique`
test, or `--key`), rows added, removed and changed with a key-ordered sample of at most
`SAMPLE_CAP` rows each. Its identity, `diff_id`, is the SHA-256 of its canonical JSON, which names
the snapshot of every table it read (fork and owner); `dpone fork promote` requires that id.

What a reader could get wrong: `fork_diff` runs in the fork's own process (the configured workspace
must be the fork, like `dpone lake sql --execute`); promotion recomputes the same document in the
parent's process through `diff_document`, which takes any session that has both sides attached.
The document holds no alias, path, time or credential, so both processes produce the same bytes
for the same snapshots. `--since-pin` adds, per table, the owner's changes since the snapshot the
fork built from (DuckLake's `ducklake_table_changes`), which is part of the identity too.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, load_config
from dpone_dagster.contracts import canonical
from dpone_dagster.control.promotion_tables import fork_diff as diff_rows
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import LakeError, WorkspaceError
from dpone_dagster.lake.lifecycle.diff_sql import TableVersions, change_counts, compare_tables
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.ancestors import ancestor_reads
from dpone_dagster.lake.resolution.pins import built_from
from dpone_dagster.lake.resolution.plan import TableName
from dpone_dagster.lake.state.tracking import WorkspaceLakeView, workspace_lake_view

SAMPLE_CAP = 20
DOCUMENT_KIND = "dpone.fork_diff/v1"
_PLAIN_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

OwnerAlias = Callable[[str], str | None]
"""Owner workspace id -> the alias its lake is attached under in this session (None: unreachable)."""


class DiffNotInForkError(WorkspaceError):
    code = "fork.diff_not_in_fork"


class NotAForkError(LakeError):
    code = "fork.not_isolated"


class NotForkMaterializedError(LakeError):
    code = "fork.diff_not_fork_materialized"


class OwnerUnreachableError(LakeError):
    code = "fork.diff_owner_unreachable"


@dataclass(frozen=True)
class ForkDiff:
    """A computed diff: `document` is what the id is taken over (and what `--json` prints)."""

    document: dict

    @property
    def diff_id(self) -> str:
        return diff_id_of(self.document)

    @property
    def fork(self) -> str:
        return self.document["fork"]

    @property
    def tables(self) -> list[dict]:
        return self.document["tables"]

    def table(self, name: str | TableName) -> dict:
        wanted = str(name if isinstance(name, TableName) else TableName.parse(name))
        for entry in self.tables:
            if entry["table"] == wanted:
                return entry
        raise KeyError(wanted)

    def as_dict(self) -> dict:
        return {"diff_id": self.diff_id, **self.document}

    def markdown(self, name: str | TableName | None = None) -> str:
        """One table's diff (or every table's) as markdown, for asset-check metadata and the CLI."""
        entries = self.tables if name is None else [self.table(name)]
        return "\n\n".join(table_markdown(e) for e in entries) + f"\n\n`diff_id` {self.diff_id}"


def diff_id_of(document: Mapping) -> str:
    return "sha256:" + hashlib.sha256(canonical.dumps(document)).hexdigest()


def table_markdown(entry: Mapping) -> str:
    owner = entry["owner"] or "no ancestor (new table)"
    lines = [
        (
            f"**{entry['table']}** vs {owner} (snapshot {entry['parent_snapshot']}); fork snapshot "
            f"{entry['fork_snapshot']}"
        ),
        "",
        f"rows: parent {entry['parent_rows']}, fork {entry['fork_rows']}",
    ]
    schema = entry["schema"]
    for label, items in (("added", schema["added"]), ("removed", schema["removed"])):
        if items:
            lines.append(f"columns {label}: " + ", ".join(f"`{c}` {t}" for c, t in items))
    if schema["type_changed"]:
        lines.append("type changed: " + ", ".join(f"`{c}` {a} → {b}" for c, a, b in schema["type_changed"]))
    rows = entry["rows"]
    if rows is None:
        lines.append("rows by key: no key (no dbt `unique` test on one column; pass `--key`)")
    else:
        lines.append(f"by key ({', '.join(entry['key'])}): +{rows['added']} / -{rows['removed']} / ~{rows['changed']}")
        changed = entry["sample"]["changed"]
        if changed:
            lines += ["", "| key | column | parent | fork |", "|---|---|---|---|"]
            for row in changed:
                key = ", ".join(f"{k}={v}" for k, v in row["key"].items())
                for col, pair in row["columns"].items():
                    lines.append(f"| {key} | {col} | {pair['parent']} | {pair['fork']} |")
    since = entry.get("parent_changes")
    if since is not None:
        lines.append(f"parent changes since snapshot {since['since']}: {since['counts'] or 'none'}")
    return "\n".join(lines)


def unique_keys(manifest: Mapping) -> dict[TableName, tuple[str, ...]]:
    """Per model (schema, relation name): the column of its dbt `unique` test. Tests on an
    expression (`a || '|' || b`) or tables with several `unique` tests on different columns give none."""
    nodes = manifest.get("nodes", {})
    found: dict[TableName, set[str]] = {}
    for node in nodes.values():
        meta = node.get("test_metadata") or {}
        if node.get("resource_type") != "test" or meta.get("name") != "unique":
            continue
        column = (meta.get("kwargs") or {}).get("column_name")
        model = nodes.get(node.get("attached_node") or "")
        if not isinstance(column, str) or model is None:
            continue
        name = TableName(model["schema"], model.get("alias") or model["name"])
        found.setdefault(name, set()).add(column)
    return {
        name: (next(iter(cols)),)
        for name, cols in found.items()
        if len(cols) == 1 and _PLAIN_COLUMN.match(next(iter(cols)))
    }


def manifest_keys(config: DponeConfig) -> dict[TableName, tuple[str, ...]]:
    """`unique_keys` of the configured dbt project's `target/manifest.json`; empty when absent."""
    path = Path(config.dbt_project_path) / "target" / "manifest.json"
    if not path.is_file():
        return {}
    try:
        return unique_keys(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def fork_tables(view: WorkspaceLakeView) -> list[TableName]:
    """Tables the fork materialized itself (its own tracked, last-materialized tables)."""
    return sorted(name for name, entry in view.tracking.of(view.chain_ids[0]).items() if entry.materialized)


def nearest_owner(view: WorkspaceLakeView, name: TableName) -> str | None:
    """The ancestor the fork's defer view of `name` would read (None: no ancestor has it)."""
    for ws in view.chain_ids[1:]:
        entry = view.tracking.of(ws).get(name)
        if entry is not None and (entry.materialized or entry.missing):
            return ws if entry.materialized else None
    return None


def _since(view: WorkspaceLakeView, config: DponeConfig, name: TableName, owner: str) -> int | None:
    """The owner's snapshot the fork's `name` was built from (else the fork's pin), or None."""
    built = built_from(config, view.chain_ids[0], _lake_of(view), name)
    return built.get(owner, view.pins.get(owner))


def _lake_of(view: WorkspaceLakeView) -> str:
    return next(iter(view.settings.values())).settings.name


def diff_document(
    conn,
    view: WorkspaceLakeView,
    tables: Sequence[TableName],
    keys: Mapping[TableName, tuple[str, ...] | None],
    *,
    fork_alias: str,
    owner_alias: OwnerAlias,
    since_pin: bool = False,
    config: DponeConfig | None = None,
    cap: int = SAMPLE_CAP,
    versions: TableVersions | None = None,
) -> dict:
    """The diff document of `tables`, read in `conn` (fork at `fork_alias`, owners via `owner_alias`)."""
    table_version = versions or TableVersions(conn)
    entries = []
    for name in sorted(set(tables)):
        owner = nearest_owner(view, name)
        alias = owner_alias(owner) if owner is not None else None
        if owner is not None and alias is None:
            raise OwnerUnreachableError(f"the lake of {owner!r}, owner of {name}, is not attached; cannot diff")
        key = keys.get(name)
        compared = compare_tables(conn, fork_alias, alias, name, key, cap)
        entry = {
            "table": str(name),
            "key": list(key) if key and alias else None,
            "owner": owner,
            "parent_snapshot": table_version(alias, name) if alias else None,
            "fork_snapshot": table_version(fork_alias, name),
            "parent_rows": compared.parent_rows,
            "fork_rows": compared.fork_rows,
            "schema": {
                "added": [list(c) for c in compared.added_columns],
                "removed": [list(c) for c in compared.removed_columns],
                "type_changed": [list(c) for c in compared.type_changed],
            },
            "rows": None
            if compared.rows_added is None
            else {"added": compared.rows_added, "removed": compared.rows_removed, "changed": compared.rows_changed},
            "sample": compared.sample,
        }
        if since_pin and alias is not None:
            start = _since(view, config or load_config(), name, owner)
            end = conn.execute(f'SELECT max(snapshot_id) FROM "{alias}".snapshots()').fetchone()[0]
            counts = change_counts(conn, alias, name, start, int(end)) if start is not None and end > start else {}
            entry["parent_changes"] = {"since": start, "to": int(end), "counts": counts}
        entries.append(entry)
    return {
        "kind": DOCUMENT_KIND,
        "fork": view.chain_ids[0],
        "incarnation": view.incarnation,
        "lake": _lake_of(view),
        "sample_cap": cap,
        "since_pin": since_pin,
        "tables": entries,
    }


def resolve_keys(
    tables: Sequence[TableName], key: Sequence[str] | None, config: DponeConfig
) -> dict[TableName, tuple[str, ...] | None]:
    """`--key` for every table when given, else each model's dbt `unique` column (or None)."""
    if key:
        return {name: tuple(key) for name in tables}
    known = manifest_keys(config)
    return {name: known.get(name) for name in tables}


def fork_diff(
    fork_id: str,
    tables: Sequence[str] = (),
    *,
    lake: str = "main",
    key: Sequence[str] | None = None,
    since_pin: bool = False,
    config: DponeConfig | None = None,
    clock: Clock = utc_now,
    cap: int = SAMPLE_CAP,
) -> ForkDiff:
    """Diff fork `fork_id`'s tables (default: every fork-materialized one) in the fork's process,
    record the diff in the control store and return it."""
    from dpone_dagster.lake.resolution.seam import resolve

    config = config or load_config()
    if config.workspace != fork_id:
        raise DiffNotInForkError(
            f"this process acts for workspace {config.workspace!r}; a diff of {fork_id!r} runs in "
            f"{fork_id!r}'s own process (DPONE_WORKSPACE={fork_id}), reading its parent READ_ONLY"
        )
    view = workspace_lake_view(fork_id, lake, config)
    if not view.fork_mode:
        raise NotAForkError(f"lake {lake!r} of {fork_id!r} is not an isolated fork lake; nothing to diff")
    own = fork_tables(view)
    names = [TableName.parse(t) for t in tables] or own
    stray = sorted(str(n) for n in names if n not in own)
    if stray:
        raise NotForkMaterializedError(f"not materialized by {fork_id!r} itself: {', '.join(stray)}")
    resolved = resolve(fork_id, lake, config=config, reads=())  # own tables + ancestors: no defer view
    attached = {a.alias for a in resolved.ancestors}
    aliases = {m: a for m, a in ancestor_reads(fork_id, lake, config).members.items() if a in attached}
    conn = resolved.connect()
    try:
        document = diff_document(
            conn,
            view,
            names,
            resolve_keys(names, key, config),
            fork_alias=resolved.alias,
            owner_alias=aliases.get,
            since_pin=since_pin,
            config=config,
            cap=cap,
        )
    finally:
        conn.close()
    result = ForkDiff(document)
    record_diff(config, result, clock)
    return result


def record_diff(config: DponeConfig, diff: ForkDiff, clock: Clock = utc_now) -> None:
    row = {
        "diff_id": diff.diff_id,
        "workspace_id": diff.fork,
        "lake": diff.document["lake"],
        "document": canonical.dumps(diff.document).decode("utf-8"),
        "created_at": clock().isoformat(),
    }
    with open_store(config.control_store).begin() as conn:
        if conn.execute(sa.select(diff_rows.c.diff_id).where(diff_rows.c.diff_id == row["diff_id"])).first() is None:
            conn.execute(diff_rows.insert().values(**row))


def recorded_diff(config: DponeConfig, diff_id: str) -> ForkDiff | None:
    """The diff recorded under `diff_id`, re-checked against its id; None when unknown."""
    with open_store(config.control_store).connect() as conn:
        row = conn.execute(sa.select(diff_rows.c.document).where(diff_rows.c.diff_id == diff_id)).first()
    if row is None:
        return None
    document = canonical.loads_canonical(row[0].encode("utf-8"))
    return ForkDiff(document) if diff_id_of(document) == diff_id else None
