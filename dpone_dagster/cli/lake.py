"""`dpone lake` commands: show exactly how a workspace attaches a lake, or run SQL through it.

What a reader could get wrong: `dpone lake sql WS LAKE` only prints the attach statements (secrets
redacted); with `--execute SQL` it attaches the lake exactly as a job would and runs SQL through the
same `GuardedConnection` jobs get, so ATTACH/DETACH, maintenance on ancestors and the other
refusals of `dpone_dagster.lake.guard.checker` apply here too (refused with their code, exit 1).
Printing works for any workspace; executing only for the workspace this process's configuration
names (`DPONE_WORKSPACE` / `dpone.yaml`), like a Dagster run: from a fork's shell,
`dpone lake sql prod main -e …` is refused with `workspace.not_this_deployment`.
"""

from __future__ import annotations

import typer

from dpone_dagster.cli.fork import reported

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command("sql")
@reported
def sql(
    workspace_id: str = typer.Argument(..., metavar="WORKSPACE"),
    lake: str = typer.Argument("main", metavar="LAKE"),
    target: list[str] = typer.Option([], "--target", help="Table the job writes (repeatable)."),
    execute: str = typer.Option(
        None, "--execute", "-e", help="Run this SQL on the attached lake (checked by the SQL guard)."
    ),
) -> None:
    """Print the statements a job in WORKSPACE would run to attach LAKE (secrets redacted), or,
    with --execute, run SQL on LAKE attached that way and print the last statement's rows."""
    from dpone_dagster.lake.resolution.seam import resolve

    if execute is not None:
        from dpone_dagster.integration.binding import check_tags

        check_tags({"dpone/workspace": workspace_id})  # before anything is resolved or attached
    resolved = resolve(workspace_id, lake, targets=target)
    if execute is None:
        for statement in resolved.statements():
            typer.echo(statement + ";")
    else:
        import duckdb

        from dpone_dagster.errors import LakeError
        from dpone_dagster.lake.guard.checker import SqlGuard
        from dpone_dagster.lake.guard.connection import GuardedConnection
        from dpone_dagster.lake.guard.statement import quote_ident

        guard = SqlGuard.for_lake(resolved)
        guard.check(execute)  # before anything is attached
        raw = resolved.connect()
        try:
            raw.execute(f"USE {quote_ident(resolved.alias)}")
            conn = GuardedConnection(raw, guard)
            try:
                conn.execute(execute)
                rows = conn.fetchall() if conn.description else []
            except duckdb.Error as exc:
                raise LakeError(f"DuckDB refused the SQL: {exc}", code="lake.sql_failed") from None
            for row in rows:
                typer.echo("\t".join("NULL" if value is None else str(value) for value in row))
        finally:
            raw.close()
    for warning in resolved.warnings:
        typer.echo(f"-- warning: {warning}", err=True)


@app.command("maintain")
@reported
def maintain(
    lake: str = typer.Argument("main", metavar="LAKE"),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would expire or be deleted; change nothing."),
    retention: str = typer.Option("7d", "--retention", help="Keep snapshots younger than this (e.g. 7d, 12h)."),
    file_grace: str = typer.Option("1d", "--file-grace", help="Keep scheduled/orphaned files younger than this."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run DuckLake maintenance (expire snapshots, clean old files, delete orphans) on the ROOT's
    LAKE, as the root's writer: never a fork file, never a snapshot a pinned fork reads."""
    import json

    from dpone_dagster.config import parse_duration
    from dpone_dagster.lake.lifecycle.maintenance import maintain as run_maintenance

    report = run_maintenance(
        lake, dry_run=dry_run, snapshot_retention=parse_duration(retention), file_grace=parse_duration(file_grace)
    )
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
        return
    verb = "would expire" if dry_run else "expired"
    typer.echo(f"lake {report.lake} (data path {report.data_path}), current snapshot {report.current_snapshot}")
    typer.echo(f"{verb} {len(report.expired_snapshots)} snapshot(s): {report.expired_snapshots}")
    if report.oldest_pin is not None:
        typer.echo(f"oldest pin: snapshot {report.oldest_pin}; kept for pinned forks: {report.held_by_pin}")
    verb = "would delete" if dry_run else "deleted"
    typer.echo(f"{verb} {len(report.old_files)} old file(s), {len(report.orphaned_files)} orphaned file(s)")
    for path in report.old_files + report.orphaned_files:
        typer.echo(f"  {path}")
    for note in report.notes:
        typer.echo(f"note: {note}")
