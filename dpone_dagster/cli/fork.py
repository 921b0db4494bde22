"""`dpone fork` commands: create, drop, list and inspect fork data environments.

Thin wrappers over `dpone_dagster.workspaces`; every refusal prints its stable code and exits 1.
"""

from __future__ import annotations

import functools
import getpass
import json
from collections.abc import Callable

import typer

from dpone_dagster.errors import DponeError

app = typer.Typer(no_args_is_help=True, add_completion=False)


def reported(command: Callable) -> Callable:
    """Print a `DponeError` as `error [code]: message` on stderr and exit 1."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except DponeError as exc:
            typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
            raise typer.Exit(1) from None

    return wrapper


def _service():
    from dpone_dagster.workspaces.service import Workspaces

    return Workspaces()


def _current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


@app.command("create")
@reported
def create(
    workspace_id: str = typer.Argument(..., metavar="ID"),
    parent: str = typer.Option(..., "--parent", help="Workspace to fork from (e.g. prod)."),
    shared: list[str] = typer.Option([], "--shared", help="Lake to share with the root (repeatable)."),
    shared_with: str = typer.Option(
        None,
        "--shared-with",
        help="Name the root (prod) explicitly: required for --shared below a fork, whose shared "
        "lakes are the root's, not the parent's.",
    ),
    owner: str = typer.Option(None, "--owner", help="Owner of the fork (default: current user)."),
    pin: bool = typer.Option(
        False, "--pin", help="Read each ancestor at its snapshot now (pinned defer) instead of live."
    ),
    ttl: str = typer.Option(
        None, "--ttl", help="Idle time after which the TTL janitor drops this fork (e.g. 3d; default: forks.ttl)."
    ),
) -> None:
    """Create a fork; every lake is isolated unless named with --shared."""
    from dpone_dagster import api

    created = api.create_fork(
        workspace_id,
        parent=parent,
        owner=owner or _current_user(),
        shared_lakes=shared,
        shared_with=shared_with,
        ttl=ttl,
        pin=pin,
    )
    typer.echo(f"created {created.id} (parent {created.parent_id}, owner {created.owner})")


@app.command("drop")
@reported
def drop(
    workspace_id: str = typer.Argument(..., metavar="ID"),
    actor: str = typer.Option(None, "--as", help="Who is dropping (default: current user)."),
    stop: bool = typer.Option(
        False, "--stop", help="Stop the fork's running `dpone dev` (webserver, daemon, code servers) first."
    ),
) -> None:
    """Delete a fork and its namespaces; re-run to retry a cleanup that could not finish. Refused
    (workspace.in_use) while the fork's own `dpone dev` runs, unless --stop stops it cleanly first."""
    from dpone_dagster import api

    result = api.drop_fork(workspace_id, actor=actor or _current_user(), stop_servers=stop)
    for process in result.servers_stopped:
        typer.echo(f"stopped {process}")
    if result.workspace_deleted:
        typer.echo(f"deleted workspace {result.workspace_id}")
    for orphan in result.orphaned:
        typer.echo(f"orphaned fork {orphan} (stays isolated)")
    for ws, lake, schema in result.cleanup.cleaned:
        typer.echo(f"cleaned {ws} lake {lake} namespace {schema}")
    for ws, lake, schema in result.cleanup.tombstones:
        typer.echo(f"swept {ws} lake {lake} ({schema}): re-swept by later cleanups (`dpone fork sweep`)")
    _report_sweep(result.others_swept)
    if result.dagster_home_removed:
        typer.echo(f"removed its Dagster home {result.dagster_home_removed}")
    if result.temp_dir_removed:
        typer.echo(f"removed its temporary folder {result.temp_dir_removed}")
    for row in result.cleanup.leftovers:
        typer.echo(
            f"left for retry: {row.workspace_id} lake {row.lake} ({row.phase} phase, {row.code})",
            err=True,
        )
    if result.cleanup.leftovers:
        raise typer.Exit(2)


def _report_sweep(report) -> None:
    if report.objects_deleted:
        typer.echo(f"removed {report.objects_deleted} late-written object(s) under swept prefixes")
    for ws, lake, _ in report.retired:
        typer.echo(f"retired tombstone {ws} lake {lake} (prefix empty after the grace period)")
    for row in report.leftovers:
        typer.echo(f"tombstone left for retry: {row.workspace_id} lake {row.lake} ({row.code})", err=True)


@app.command("sweep")
@reported
def sweep() -> None:
    """Sweep again the prefixes of dropped forks whose late writers the drop could not rule out
    (PostgreSQL catalogs); a tombstone goes once its prefix stays empty past the grace period."""
    report = _service().sweep()
    _report_sweep(report)
    typer.echo(f"{len(report.tombstones)} tombstone(s) still pending, {len(report.retired)} retired")
    if report.leftovers:
        raise typer.Exit(2)


@app.command("list")
@reported
def list_(as_json: bool = typer.Option(False, "--json")) -> None:
    """List workspaces, including deleted ones whose cleanup is pending."""
    from dpone_dagster import api

    rows = api.list_workspaces()
    if as_json:
        typer.echo(json.dumps([r.__dict__ for r in rows], indent=2, default=list))
        return
    for r in rows:
        notes = [r.kind]
        if r.orphaned:
            notes.append("orphaned")
        if r.shared_lakes:
            notes.append("shared: " + ",".join(r.shared_lakes))
        if r.pending_cleanup:
            notes.append(f"{r.pending_cleanup} namespace(s) pending cleanup")
        if r.tombstones:
            notes.append(f"{r.tombstones} swept prefix(es) re-swept until empty past the grace period")
        typer.echo(f"{r.id}\tparent={r.parent_id or '-'}\towner={r.owner or '-'}\t{'; '.join(notes)}")


@app.command("status")
@reported
def status(
    workspace_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Per lake: mode, namespace, data path, and every tracked table's fork_state and owner."""
    from dpone_dagster import api
    from dpone_dagster.lake.state.staleness import workspace_staleness

    result = api.fork_status(workspace_id)
    staleness = {s.lake: s for s in workspace_staleness(workspace_id)}  # pins and staleness (lake/state/staleness.py)
    _touch(workspace_id)  # a status read counts as use for the TTL janitor
    if as_json:
        typer.echo(json.dumps({**result.as_dict(), "staleness": [s.as_dict() for s in staleness.values()]}, indent=2))
        return
    typer.echo(f"workspace {result.workspace_id} (chain: {' -> '.join(result.chain)})")
    for lake in result.lakes:
        typer.echo(f"lake {lake.lake}: {lake.mode}")
        if lake.namespace:
            typer.echo(f"  namespace {lake.namespace}")
        typer.echo(f"  data path {lake.data_path}")
        if lake.problem:
            typer.echo(f"  problem {lake.problem}")
        for table in lake.tables:
            owner = f" (owner {table.owner})" if table.owner else ""
            typer.echo(f"  {table.table}: {table.fork_state}{owner}")
            if table.partitions:
                typer.echo(f"    fork partitions: {', '.join(table.partitions)}")
        _echo_staleness(staleness.get(lake.lake))


def _echo_staleness(lake) -> None:
    """Pins and staleness of one lake under `dpone fork status` (see lake/state/staleness.py)."""
    if lake is None or not lake.fork_mode:
        return
    pins = ", ".join(f"{owner}@{snapshot}" for owner, snapshot in sorted(lake.pins.items()))
    typer.echo(f"  defer: {lake.mode}" + (f" (pinned at {pins})" if pins else ""))
    for d in lake.deferred:
        behind = f", owner {d.snapshots_behind} snapshot(s) ahead" if d.snapshots_behind else ""
        since = f" for {d.behind_seconds:.0f}s" if d.snapshots_behind and d.behind_seconds is not None else ""
        changed = "changed in owner since reference" if d.table_changed else "unchanged in owner"
        typer.echo(f"  stale? {d.table} (deferred from {d.owner}): {changed}{behind}{since}")
    for b in lake.built:
        built = ", ".join(f"{o}@{s}" for o, s in sorted(b.built_from.items())) or "no ancestor"
        verdict = f"upstream changed: {', '.join(b.changed_upstreams)}" if b.upstream_changed else "upstreams unchanged"
        typer.echo(f"  stale? {b.table} (built from {built}): {verdict}")
    for problem in lake.problems:
        typer.echo(f"  staleness problem: {problem}")


@app.command("repin")
@reported
def repin(
    workspace_id: str = typer.Argument(..., metavar="FORK"),
    lake: str = typer.Option(None, "--lake", help="Only this lake (pins it if it read live)."),
    actor: str = typer.Option(None, "--as", help="Who is re-pinning (default: current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Move a fork's pins forward to its ancestors' current snapshots."""
    moved = _service().repin(workspace_id, lake, actor=actor or _current_user())
    if as_json:
        typer.echo(json.dumps({"workspace_id": workspace_id, "pins": moved}, indent=2))
        return
    if not moved:
        typer.echo(f"{workspace_id} has no pinned lake (name one with --lake to pin it)")
    for name, pins in sorted(moved.items()):
        typer.echo(f"lake {name}: pinned at " + ", ".join(f"{o}@{s}" for o, s in sorted(pins.items())))


@app.command("grant-admin")
@reported
def grant_admin(
    workspace_id: str = typer.Argument(..., metavar="ID"),
    actor: str = typer.Argument(..., metavar="ACTOR"),
    granted_by: str = typer.Option(None, "--as", help="Who grants (default: current user)."),
) -> None:
    """Make ACTOR an admin of workspace ID (and so of every fork below it)."""
    _service().grant_admin(workspace_id, actor, granted_by=granted_by or _current_user())
    typer.echo(f"{actor} is an admin of {workspace_id}")


def _duration(text: str | None):
    from dpone_dagster.config import parse_duration

    return parse_duration(text) if text else None


def _touch(workspace_id: str) -> None:
    from dpone_dagster.config import load_config
    from dpone_dagster.lake.state.usage import touch_last_used

    touch_last_used(workspace_id, load_config())


@app.command("janitor")
@reported
def janitor(
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be dropped and why; drop nothing."),
    ttl: str = typer.Option(
        None, "--ttl", help="Default TTL for forks without their own (e.g. 3d; default: forks.ttl)."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Drop throwaway forks idle longer than their TTL (standing dev workspaces and prod: never)."""
    from dpone_dagster.workspaces.janitor import Janitor

    report = Janitor(_service(), ttl_override=_duration(ttl)).run(dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for verdict in report.verdicts:
            mark = ("would drop" if dry_run else "drop") if verdict.drop else "keep"
            typer.echo(f"{mark} {verdict.workspace_id} (owner {verdict.owner}): {verdict.reason}")
        for ws in report.dropped:
            typer.echo(f"dropped {ws}")
        for ws, code in report.failed:
            typer.echo(f"not dropped: {ws} ({code})", err=True)
        for ws, lake, code in report.left_for_retry:
            typer.echo(f"left for retry: {ws} lake {lake} ({code}); `dpone fork drop {ws}` retries", err=True)
    if report.failed or report.left_for_retry:
        raise typer.Exit(2)


@app.command("ensure")
@reported
def ensure(
    from_git: bool = typer.Option(
        False, "--from-git", help="The fork of the git branch checked out in the current folder (OSS)."
    ),
    owner: str = typer.Option(None, "--owner", help="Owner of a fork created with --from-git (default: current user)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Create the branch's fork if missing (parent: forks.branch_parent); in a Dagster+ branch
    deployment whose pull request is closed or merged, drop it."""
    from pathlib import Path

    from dpone_dagster.workspaces.branch import ensure_for_deployment, ensure_for_git

    if from_git:
        result = ensure_for_git(Path.cwd(), owner=owner or _current_user())
    else:
        result = ensure_for_deployment(required=True)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
    else:
        typer.echo(f"{result.action} {result.workspace_id} (parent {result.parent_id}, {result.source})")
        if result.left_for_retry:
            typer.echo(
                f"{result.left_for_retry} namespace(s) left for retry; `dpone fork drop {result.workspace_id}` retries",
                err=True,
            )
    if result.left_for_retry:
        raise typer.Exit(2)


from dpone_dagster.cli.fork_promotion import register as _register_promotion  # noqa: E402

_register_promotion(app, reported)  # `dpone fork diff` and `dpone fork promote`
