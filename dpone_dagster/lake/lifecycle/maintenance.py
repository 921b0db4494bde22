"""`maintain`: DuckLake's maintenance for a ROOT lake, in a way that cannot break a fork.

Runs, as the root's own writer, DuckLake 1.5.5's `ducklake_expire_snapshots`,
`ducklake_cleanup_old_files` and `ducklake_delete_orphaned_files` on the lake attached exactly as
`prod` attaches it. Three guarantees:

1. No fork file is ever listed as an orphan. DuckLake's orphan scan is
   `read_blob(<DATA_PATH> || '**')` minus the files its own catalog knows, so *every* file under the
   data path that the root catalog does not reference — a fork's files included — would go. Fork
   data lives at `<storage root>/__wm_forks/<segment>/` (see `naming.py`), beside the lake's data
   path, never below it; but another lake configured at a storage root (or a data path that is a
   mere string prefix of a forks root: the scan glues `**` to the raw path) would contain some
   lake's forks root. `maintain` refuses such a data path (`lake.maintain_forks_under_data_path`),
   checking the configured path AND the path the catalog itself stores, against the forks root of
   every configured lake, every fork's stored settings and every ledger/tombstone row. Belt and
   braces: every DuckLake deletion runs as a dry run first, and a listing that names a file under a
   forks root, or (orphans) outside the data path, is refused (`lake.maintain_fork_file_listed`)
   before anything is deleted; the deletion then runs with the same cutoff, which only files older
   than it can meet.
2. No snapshot a pinned fork reads is expired. A pinned fork reads the root `AT (VERSION => n)`;
   `maintain` expires (by explicit version list) only snapshots older than the retention AND older
   than the oldest pin (`lake.pins.oldest_pinned_snapshot`), and reports the snapshots a pin held
   back. Files visible at a kept snapshot stay referenced, so `cleanup_old_files` never meets them.
   Snapshots are listed *before* pins are read, and DuckLake never expires the current snapshot,
   so a pin taken at the current snapshot during a run is safe. If the pins cannot be read, nothing
   is expired (`lake.maintain_pins_unavailable`).
3. Live (unpinned) forks are safe by construction: their defer views read the root's *current*
   snapshot, which DuckLake never expires, and the files it references are neither scheduled for
   deletion nor orphans. A query a live fork started on a snapshot that has just been superseded is
   covered by the retention (snapshots younger than it are kept) and the file grace (scheduled
   files younger than it are kept).

Files a promotion moved in from a fork (`promote_files.py`) are the root's own once its commit lists
them; before that they are journaled. `maintain` first settles or puts back the files of promotions
that crashed (`recover_promotions`), and skips the orphan sweep while a promotion is still in
flight (a moved file is under the data path before the commit that makes it the root's).

What a reader could get wrong: a dry run lists the snapshots that would expire and the files that
are *already* scheduled for deletion or orphaned; files freed by this run's own expiry become
deletable only once they have been scheduled for longer than the file grace (a later run). And
`maintain` refuses to run anywhere but in the root's deployment (`lake.maintain_not_root`): a
fork's process must never write its ancestor (its ancestors are attached READ_ONLY anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dpone_dagster.config import DponeConfig, LakeConfig, load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.control.lake_tables import fork_ducklake_namespace, fork_prefix_tombstone
from dpone_dagster.control.store import open_store
from dpone_dagster.control.workspace_tables import workspace_lake
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import quote_ident, sql_string
from dpone_dagster.lake.lifecycle.promote_files import committed_promotions, pending_promotions, recover_promotions
from dpone_dagster.lake.ports import Clock, utc_now
from dpone_dagster.lake.resolution.attach import absolute_data_path
from dpone_dagster.lake.resolution.naming import FORK_DATA_DIR, DataPathError, split_storage_root
from dpone_dagster.lake.resolution.seam import resolve

SNAPSHOT_RETENTION = timedelta(days=7)
"""Snapshots younger than this are kept (time travel; queries in flight on a superseded snapshot)."""
FILE_GRACE = timedelta(days=1)
"""Scheduled-for-deletion and orphaned files younger than this are kept (uploads not yet committed)."""

PinsReader = Callable[[Engine, str, str], "int | None"]
_MARKER = f"/{FORK_DATA_DIR}/"


class NotRootWriterError(LakeError):
    code = "lake.maintain_not_root"


class ForksUnderDataPathError(LakeError):
    code = "lake.maintain_forks_under_data_path"


class ForkFileListedError(LakeError):
    code = "lake.maintain_fork_file_listed"


class PinsUnavailableError(LakeError):
    code = "lake.maintain_pins_unavailable"


@dataclass
class MaintenanceReport:
    lake: str
    dry_run: bool
    data_path: str
    snapshot_cutoff: str
    file_cutoff: str
    current_snapshot: int | None = None
    oldest_pin: int | None = None
    expired_snapshots: list[int] = field(default_factory=list)
    held_by_pin: list[int] = field(default_factory=list)
    old_files: list[str] = field(default_factory=list)
    orphaned_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _forks_root_of(data_path: str) -> str | None:
    head, found, _ = data_path.partition(_MARKER)
    if found:
        return f"{head}{_MARKER}"
    try:
        root, _ = split_storage_root(data_path)
    except DataPathError:
        return None
    return f"{root.rstrip('/')}{_MARKER}"


def forks_roots(config: DponeConfig, engine: Engine) -> set[str]:
    """Every `<storage root>/__wm_forks/` a fork of any lake may write to, as far as is known."""
    paths = [absolute_data_path(lake.data_path, config.project_root) for lake in config.all_lakes]
    with engine.connect() as conn:
        for table in (fork_ducklake_namespace, fork_prefix_tombstone):
            paths += [row[0] for row in conn.execute(sa.select(table.c.data_path))]
        for (settings,) in conn.execute(sa.select(workspace_lake.c.settings)):
            stored = LakeConfig.model_validate_json(settings)
            paths.append(absolute_data_path(stored.data_path, config.project_root))
    return {root for root in map(_forks_root_of, paths) if root}


def check_data_path(data_path: str, roots: Iterable[str]) -> None:
    """Refuse a data path whose orphan scan (`<data_path>**`, raw string) could reach a forks root."""
    if _MARKER in data_path or data_path.rstrip("/").endswith(_MARKER.rstrip("/")):
        raise ForksUnderDataPathError(
            "this lake's data path lies inside a forks root (`__wm_forks/`); maintaining it would "
            "treat fork files as its own orphans"
        )
    inside = sorted(root for root in roots if root.startswith(data_path))
    if inside:
        raise ForksUnderDataPathError(
            f"this lake's data path contains the forks root {inside[0]!r}: DuckLake's orphan scan "
            "lists every file below the data path, so fork files would be deleted as orphans. Give "
            "the lake a data path below its storage root (e.g. s3://bucket/lakes/<name>/)"
        )


def check_listing(paths: Iterable[str], roots: Iterable[str], data_path: str | None) -> None:
    """Refuse a deletion listing that names a fork file (or, for orphans, a file outside the data path)."""
    roots = tuple(roots)
    for path in paths:
        if _MARKER in path or any(path.startswith(root) for root in roots):
            raise ForkFileListedError("DuckLake listed a file under a forks root for deletion; nothing was deleted")
        if data_path is not None and not path.startswith(data_path):
            raise ForkFileListedError("DuckLake listed an orphan outside this lake's data path; nothing was deleted")


def _default_pins(engine: Engine, owner: str, lake: str) -> int | None:
    try:
        from dpone_dagster.lake.resolution.pins import oldest_pinned_snapshot
    except ImportError:
        raise PinsUnavailableError(
            "the fork pins cannot be read (lake.pins is missing), so no snapshot is expired"
        ) from None
    return oldest_pinned_snapshot(engine, owner, lake)


def _ts(moment: datetime) -> str:
    return f"TIMESTAMPTZ {sql_string(moment.isoformat())}"


def _paths(conn, function: str, alias: str, cutoff: datetime, dry_run: bool) -> list[str]:
    sql = (
        f"SELECT path FROM {function}({sql_string(alias)}, older_than => {_ts(cutoff)}, "
        f"dry_run => {'true' if dry_run else 'false'})"
    )
    return sorted(row[0] for row in conn.execute(sql).fetchall())


def _delete_files(conn, function: str, alias: str, cutoff: datetime, dry_run: bool, roots, data_path) -> list[str]:
    """Dry run, check the listing, then (unless `dry_run`) delete with the same cutoff."""
    listed = _paths(conn, function, alias, cutoff, True)
    check_listing(listed, roots, data_path)
    if dry_run or not listed:
        return listed
    deleted = _paths(conn, function, alias, cutoff, False)
    check_listing(deleted, roots, data_path)  # same cutoff: only files already old at the dry run
    return deleted


def maintain(
    lake: str = "main",
    *,
    config: DponeConfig | None = None,
    dry_run: bool = False,
    clock: Clock = utc_now,
    snapshot_retention: timedelta = SNAPSHOT_RETENTION,
    file_grace: timedelta = FILE_GRACE,
    pins: PinsReader | None = None,
) -> MaintenanceReport:
    """Expire snapshots, delete old files and orphans of the root's `lake` (see the module doc)."""
    config = config or load_config()
    if config.workspace != ROOT_WORKSPACE:
        raise NotRootWriterError(
            f"maintenance runs only as the root's own writer; this process acts for workspace "
            f"{config.workspace!r} (run it from the {ROOT_WORKSPACE!r} deployment)"
        )
    engine = open_store(config.control_store)
    resolved = resolve(ROOT_WORKSPACE, lake, config=config)
    roots = forks_roots(config, engine)
    check_data_path(resolved.data_path, roots)  # before anything is attached
    now = clock()
    snapshot_cutoff, file_cutoff = now - snapshot_retention, now - file_grace
    conn = resolved.connect()
    try:
        alias = resolved.alias
        stored = conn.execute(f"SELECT data_path FROM ducklake_settings({sql_string(alias)})").fetchone()
        data_path = stored[0] if stored and stored[0] else resolved.data_path
        check_data_path(data_path, roots)
        report = MaintenanceReport(lake, dry_run, data_path, snapshot_cutoff.isoformat(), file_cutoff.isoformat())
        snapshots = conn.execute(
            f"SELECT snapshot_id, snapshot_time FROM {quote_ident(alias)}.snapshots() ORDER BY snapshot_id"
        ).fetchall()
        report.current_snapshot = snapshots[-1][0] if snapshots else None
        old = [sid for sid, at in snapshots if sid != report.current_snapshot and at < snapshot_cutoff]
        report.oldest_pin = (pins or _default_pins)(engine, ROOT_WORKSPACE, lake)  # after listing
        pin = report.oldest_pin
        report.expired_snapshots = [sid for sid in old if pin is None or sid < pin]
        report.held_by_pin = [sid for sid in old if sid not in report.expired_snapshots]
        if report.held_by_pin:
            report.notes.append(
                f"expired only up to the oldest pin (snapshot {pin}): {len(report.held_by_pin)} older "
                "snapshot(s) kept for pinned forks"
            )
        if report.expired_snapshots:
            versions = ", ".join(str(int(sid)) for sid in report.expired_snapshots)
            conn.execute(
                f"SELECT snapshot_id FROM ducklake_expire_snapshots({sql_string(alias)}, "
                f"versions => [{versions}]::UBIGINT[], dry_run => {'true' if dry_run else 'false'})"
            ).fetchall()
        report.old_files = _delete_files(conn, "ducklake_cleanup_old_files", alias, file_cutoff, dry_run, roots, None)
        if not dry_run:
            recover_promotions(config, ROOT_WORKSPACE, lake, committed_promotions(conn, alias), clock=clock)
        if pending_promotions(config, ROOT_WORKSPACE, lake):
            report.notes.append("a fork promotion is in flight: its moved files are not committed yet, no orphan sweep")
        else:
            report.orphaned_files = _delete_files(
                conn, "ducklake_delete_orphaned_files", alias, file_cutoff, dry_run, roots, data_path
            )
        if dry_run:
            report.notes.append("dry run: nothing was expired or deleted")
        return report
    finally:
        conn.close()
