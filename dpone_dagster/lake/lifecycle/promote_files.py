"""Promotion by moving files: a fork table's data files become the parent's, no byte copied.

`promote` (promote.py) asks `plan_table` whether a table's files can move, `FileMover` moves them
(journaled in the control store, `fork_promotion_file`) and the parent's DuckLake transaction then
registers them with `ducklake_add_data_files`, which makes them the parent's own files: listed in
its `ducklake_data_file`, scheduled for deletion when superseded and expired, never orphans.

Each file is named `promoted-<promotion id>-<its fork name>` in `<parent data path>/<schema>/<table>/`,
so a table of several files is registered with one glob (`registration_paths`): DuckLake reads the
footers of one glob in one parallel query, of a list one file after another (at 1 GB, ~3 files and
~330 row groups, that was most of what a promotion's time grew with the table).

- Local disk: `rename` (same file system only), then a symbolic link at the old path, so the fork
  keeps reading the table it built. The fork can no longer write the bytes (they are outside its
  tree; the kernel confinement lets it read the parent's data path, never write it); removing its
  link, which its drop does, removes nothing else.
- S3: a server-side `CopyObject` into the parent's data path (same bucket); the fork keeps its own
  object, which its drop deletes.

A table is copied instead (`CREATE OR REPLACE TABLE … AS SELECT`, the reason in the result) when
the move would not carry exactly the rows the fork's table shows: different storage (another file
system, bucket or endpoint), a view (an SCD2 `_current` companion), an empty table, a partitioned
table, a table whose columns changed after its files were written, delete files or inlined rows
(inserted or deleted), encrypted files, or a file that is not a plain file of the fork's own tree.

Crashes: every file is journaled `pending` before it is touched; the parent's commit carries
`dpone-promotion:<id>` as its DuckLake commit info. `recover_promotions` (run by every promotion
and by `maintain` before its orphan sweep; a parent that is itself a fork has no maintenance and no
orphan sweep, so its next promotion recovers) looks at rows pending longer than `RECOVERY_GRACE`: a
committed promotion is settled (link restored, row `adopted`); an uncommitted one is put back
(local: the link removed, the file renamed back; S3: the copy is left as an orphan, which the
parent's orphan sweep deletes). The only deletion is a failed promotion's own S3 copies, taken
back by the process that made them once the parent's transaction rolled back.

What a reader could get wrong: a file moved on a local disk is read by the fork through its link
until the parent's own maintenance deletes it (superseded and expired): from then on the fork's
old copy of that table is gone, as if promoted *out of* the fork; rebuild it there if needed. And a
fork process that already held the file open for writing before the rename could still write it:
the move trusts the fork's files as the copy trusts its rows. The glob registers any file of the
promotion's name in the table's folder: only the parent's own processes can write there (a fork is
confined to its prefix), and the id is a fresh random one, so none but the moved files has it.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

import sqlalchemy as sa

from dpone_dagster.config import DponeConfig, StorageConfig
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.control.promotion_tables import fork_promotion_file as journal
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import DponeError
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.object_store import S3Prefixes, split_s3
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.plan import TableName

RECOVERY_GRACE = timedelta(hours=1)
"""A journal row pending longer than this belongs to a crashed promotion (a live one takes seconds)."""
COMMIT_MARK = "dpone-promotion:"
PENDING, ADOPTED = "pending", "adopted"
RENAME, S3_COPY = "rename", "s3_copy"


class PromotionMoveError(CodedError):
    codes = {
        "fork.promotion_move_refused": (
            "A fork file could not be moved safely into the parent; the promotion copied the tables instead."
        ),
        "fork.promotion_undo_failed": (
            "A failed promotion could not put a moved file back; it stays journaled and "
            "the next promotion or maintenance retries."
        ),
    }


@dataclass(frozen=True)
class TablePlan:
    """How one table is published: its fork files move (`copy_reason` None) or its rows are copied."""

    name: TableName
    files: tuple[str, ...] = ()
    rows: int = 0
    copy_reason: str | None = None

    @property
    def moves(self) -> bool:
        return self.copy_reason is None

    def copied(self, reason: str) -> TablePlan:
        return replace(self, files=(), rows=0, copy_reason=self.copy_reason or reason)


def storage_reason(fork_path: str, parent_path: str, fork_storage, parent_storage) -> str | None:
    """Why the fork's files cannot move into the parent's data path at all (None: they can)."""
    if fork_path.startswith("s3://") and parent_path.startswith("s3://"):
        if split_s3(fork_path)[0] != split_s3(parent_path)[0]:
            return "different storage (another bucket)"
        same = (fork_storage or StorageConfig()).endpoint == (parent_storage or StorageConfig()).endpoint
        return None if same else "different storage (another endpoint)"
    if "://" in fork_path or "://" in parent_path:
        return "different storage (not both local or both S3)"
    try:
        if os.stat(fork_path).st_dev != os.stat(parent_path).st_dev:
            return "different storage (another file system: a rename cannot cross it)"
    except OSError:
        return "different storage (a data path is not reachable)"
    return None


def metadata_prefix(alias: str, schema: str | None) -> str:
    """Where a DuckLake attached as `alias` keeps its catalog tables (PostgreSQL: a schema of it)."""
    return quote_ident(f"__ducklake_metadata_{alias}") + (f".{quote_ident(schema)}" if schema else "")


def plan_table(conn, fork_alias: str, meta: str, name: TableName, reason: str | None) -> TablePlan:
    """Whether `name`'s files in the fork carry exactly its rows, so moving them publishes it."""
    plan = TablePlan(name)
    if reason:
        return plan.copied(reason)
    found = conn.execute(
        f"SELECT t.table_id FROM {meta}.ducklake_table t JOIN {meta}.ducklake_schema s ON s.schema_id = t.schema_id "
        "WHERE s.schema_name = ? AND t.table_name = ? AND t.end_snapshot IS NULL AND s.end_snapshot IS NULL",
        [name.schema, name.table],
    ).fetchone()
    if found is None:
        return plan.copied("a view in the fork (e.g. an SCD2 _current companion), no files of its own")
    (table_id,) = found
    partitioned, evolved, recorded = conn.execute(
        f"SELECT (SELECT count(*) FROM {meta}.ducklake_partition_info WHERE table_id = $1 AND end_snapshot IS NULL), "
        f"(SELECT count(*) FILTER (WHERE end_snapshot IS NOT NULL) + count(DISTINCT begin_snapshot) "
        f" FROM {meta}.ducklake_column WHERE table_id = $1), "
        f"(SELECT coalesce(sum(record_count), 0) FROM {meta}.ducklake_data_file WHERE table_id = $1 AND "
        "end_snapshot IS NULL)",
        [table_id],
    ).fetchone()
    if partitioned:
        return plan.copied("a partitioned table")
    if evolved > 1:
        return plan.copied("its columns changed after its files were written")
    listed = conn.execute(
        "SELECT data_file, delete_file, data_file_encryption_key FROM ducklake_list_files(?, ?, schema => ?)",
        [fork_alias, name.table, name.schema],
    ).fetchall()
    if not listed:
        return plan.copied("an empty table (nothing to move)")
    if any(delete for _, delete, _ in listed):
        return plan.copied("the fork deleted rows (delete files)")
    if any(key is not None for _, _, key in listed):
        return plan.copied("encrypted files")
    inlined = conn.execute(
        f"SELECT table_name FROM {meta}.ducklake_inlined_data_tables WHERE table_id = ?", [table_id]
    ).fetchall()
    live_inlined = sum(
        conn.execute(f"SELECT count(*) FROM {meta}.{quote_ident(t)} WHERE end_snapshot IS NULL").fetchone()[0]
        for (t,) in inlined
    )
    (rows,) = conn.execute(f"SELECT count(*) FROM {name.qualified(fork_alias)}").fetchone()  # from the catalog, no scan
    if live_inlined or rows != recorded:  # no inlined row: fewer rows than the files hold = inlined deletions
        return plan.copied("inlined rows (inserted or deleted in the catalog, not in files)")
    return replace(plan, files=tuple(sorted(path for path, _, _ in listed)), rows=int(recorded))


PROMOTED_PREFIX = "promoted-"
_GLOB_CHARS = frozenset("*?[]{}\\")


def target_path(parent_data_path: str, name: TableName, source: str, promotion_id: str) -> str:
    """`<parent data path>/<schema>/<table>/promoted-<promotion id>-<the fork's file name>`: the
    promotion's files share a name no other file has, so one glob names exactly them."""
    base = source.rsplit("/", 1)[-1]
    return f"{parent_data_path.rstrip('/')}/{name.schema}/{name.table}/{PROMOTED_PREFIX}{promotion_id}-{base}"


def registration_paths(targets: Sequence[str], promotion_id: str) -> list[str]:
    """What `ducklake_add_data_files` is given for one table's moved files: one glob matching exactly
    them where it can be written, else the list. DuckLake reads the footers of one glob in one
    query, in parallel; a list is read one file after another, and a 1 GB table is ~3 files."""
    folders = {t.rsplit("/", 1)[0] for t in targets}
    if len(targets) < 2 or len(folders) != 1:
        return list(targets)
    (folder,) = folders
    prefix = f"{PROMOTED_PREFIX}{promotion_id}-"
    if any(c in _GLOB_CHARS for c in folder) or not all(t.rsplit("/", 1)[1].startswith(prefix) for t in targets):
        return list(targets)
    return [f"{folder}/{prefix}*"]


@dataclass(frozen=True)
class Transfer:
    source: str
    target: str
    method: str


def _refused(detail: str) -> PromotionMoveError:
    return PromotionMoveError("fork.promotion_move_refused", f"a fork file cannot be moved: {detail}")


def _rename_into_parent(source: str, target: str, fork_root: str) -> None:
    """Rename one plain file of the fork's own tree (no link on the way, no second name), leave a link."""
    folder, base = os.path.split(source)
    real_root = os.path.realpath(fork_root)
    if os.path.realpath(folder) != os.path.normpath(os.path.join(real_root, os.path.relpath(folder, fork_root))):
        raise _refused("its folder is reached through a link")
    if os.path.lexists(target):
        raise _refused("the parent already has a file of that name")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        before = os.lstat(base, dir_fd=fd)
        if not stat.S_ISREG(before.st_mode) or before.st_nlink != 1:
            raise _refused("not a plain file with one name")
        os.rename(base, target, src_dir_fd=fd)
        after = os.lstat(target)
        if (after.st_ino, after.st_dev) != (before.st_ino, before.st_dev) or after.st_nlink != 1:
            os.rename(target, base, dst_dir_fd=fd)
            raise _refused("it changed while it was moved")
        os.utime(target)  # fresh: an orphan sweep's `older_than` cannot meet it while in flight
        os.symlink(target, base, dir_fd=fd)
    finally:
        os.close(fd)


def _put_back(transfer: Transfer) -> None:
    """Undo one local rename: the link goes, the file returns (a dropped fork's file stays put)."""
    if transfer.method != RENAME:
        return  # an S3 copy is an orphan of the parent now; its sweep deletes it
    if os.path.islink(transfer.source):
        os.unlink(transfer.source)
    if os.path.lexists(transfer.target) and not os.path.lexists(transfer.source):
        if os.path.isdir(os.path.dirname(transfer.source)):
            os.rename(transfer.target, transfer.source)


def _relink(transfer: Transfer) -> None:
    if transfer.method == RENAME and not os.path.lexists(transfer.source):
        if os.path.isdir(os.path.dirname(transfer.source)):
            os.symlink(transfer.target, transfer.source)


@dataclass
class FileMover:
    """Moves the files of one promotion, journaling each before touching it; `undo` reverses them."""

    config: DponeConfig
    parent: str
    lake: str
    fork: str
    parent_data_path: str
    fork_data_path: str
    storage: StorageConfig | None
    clock: Clock = utc_now
    s3: S3Prefixes = field(default_factory=S3Prefixes)
    promotion_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    done: list[Transfer] = field(default_factory=list)

    @property
    def commit_info(self) -> str:
        return COMMIT_MARK + self.promotion_id

    def move(self, plans: Sequence[TablePlan]) -> dict[TableName, tuple[str, ...]]:
        """Every file of every moving plan, journaled first; the targets by table."""
        method = S3_COPY if self.parent_data_path.startswith("s3://") else RENAME
        planned = [
            (p.name, Transfer(f, target_path(self.parent_data_path, p.name, f, self.promotion_id), method))
            for p in plans
            for f in p.files
        ]
        if not planned:
            return {}
        now = self.clock().isoformat()
        with open_store(self.config.control_store).begin() as conn:
            conn.execute(
                journal.insert(),
                [
                    dict(
                        promotion_id=self.promotion_id,
                        target=t.target,
                        workspace_id=self.parent,
                        lake=self.lake,
                        fork_id=self.fork,
                        schema_name=n.schema,
                        table_name=n.table,
                        source=t.source,
                        method=t.method,
                        state=PENDING,
                        created_at=now,
                    )
                    for n, t in planned
                ],
            )
        out: dict[TableName, list[str]] = {}
        for name, transfer in planned:
            if not transfer.source.startswith(self.fork_data_path):
                raise _refused("it lies outside the fork's data path")
            try:
                if method == RENAME:
                    _rename_into_parent(transfer.source, transfer.target, self.fork_data_path)
                else:
                    self.s3.copy_object(transfer.source, transfer.target, self.storage)
            except OSError as exc:
                raise _refused(f"the file system refused ({type(exc).__name__})") from None
            except DponeError as exc:
                if isinstance(exc, PromotionMoveError):
                    raise
                raise _refused(f"the object store refused ({exc.code})") from None
            self.done.append(transfer)
            out.setdefault(name, []).append(transfer.target)
        return {name: tuple(targets) for name, targets in out.items()}

    def undo(self) -> None:
        """Put back every file moved so far and forget the journal rows (nothing was committed):
        local files return to the fork, S3 copies are deleted."""
        try:
            for transfer in reversed(self.done):
                if transfer.method == S3_COPY:
                    self.s3.delete_copy(transfer.target, self.storage)
                _put_back(transfer)
        except (OSError, DponeError):
            raise PromotionMoveError(
                "fork.promotion_undo_failed",
                "a moved file could not be put back into the fork; it stays journaled for recovery",
            ) from None
        self.done.clear()
        with open_store(self.config.control_store).begin() as conn:
            conn.execute(journal.delete().where(journal.c.promotion_id == self.promotion_id))


def mark_adopted(conn, promotion_id: str) -> None:
    """In the caller's control-store transaction: the promotion committed, its files are the parent's."""
    conn.execute(journal.update().where(journal.c.promotion_id == promotion_id).values(state=ADOPTED))


def committed_promotions(conn, alias: str) -> set[str]:
    """The promotion ids the DuckLake attached as `alias` committed (from its snapshots' commit info)."""
    rows = conn.execute(
        (
            f"SELECT commit_extra_info FROM {quote_ident(alias)}.snapshots() WHERE commit_extra_info LIKE "
            f"{sql_string(COMMIT_MARK + '%')}"
        )
    ).fetchall()
    return {info.removeprefix(COMMIT_MARK) for (info,) in rows}


def pending_promotions(config: DponeConfig, workspace: str, lake: str) -> list[dict]:
    query = sa.select(journal).where(
        journal.c.workspace_id == workspace, journal.c.lake == lake, journal.c.state == PENDING
    )
    with open_store(config.control_store).connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def recover_promotions(
    config: DponeConfig,
    workspace: str,
    lake: str,
    committed: Collection[str],
    *,
    clock: Clock = utc_now,
    grace: timedelta = RECOVERY_GRACE,
) -> list[str]:
    """Settle or put back the files of promotions into `workspace`'s `lake` that crashed (pending
    longer than `grace`); `committed` are the promotion ids its catalog committed. Returns the
    promotion ids recovered."""
    cutoff = (clock() - grace).isoformat()
    stale: dict[str, list[dict]] = {}
    for row in pending_promotions(config, workspace, lake):
        if row["created_at"] <= cutoff:
            stale.setdefault(row["promotion_id"], []).append(row)
    for promotion_id, rows in sorted(stale.items()):
        transfers = [Transfer(r["source"], r["target"], r["method"]) for r in rows]
        _each(_relink if promotion_id in committed else _put_back, transfers)
        with open_store(config.control_store).begin() as conn:
            if promotion_id in committed:
                mark_adopted(conn, promotion_id)
            else:
                conn.execute(journal.delete().where(journal.c.promotion_id == promotion_id))
    return sorted(stale)


def _each(action: Callable[[Transfer], None], transfers: Iterable[Transfer]) -> None:
    try:
        for transfer in transfers:
            action(transfer)
    except OSError:
        raise PromotionMoveError(
            "fork.promotion_undo_failed", "a crashed promotion's file could not be settled; it stays journaled"
        ) from None
