"""`dpone lake` commands: show exactly how a workspace attaches a lake, or run SQL through it.

What a reader could get wrong: `dpone lake sql WS LAKE` only prints the attach statements (secrets
redacted); with `--execute SQL` it attaches the lake exactly as a job would and runs SQL through the
same `GuardedConnection` jobs get, so ATTACH/DETACH, maintenance on ancestors and the other
refusals of `dpone_dagster.lake.sql_guard` apply here too (refused with their code, exit 1).
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
    from dpone_dagster.lake.resolve import resolve

    if execute is not None:
        from dpone_dagster.defs.workspace_binding import check_tags

        check_tags({"dpone/workspace": workspace_id})  # before anything is resolved or attached
    resolved = resolve(workspace_id, lake, targets=target)
    if execute is None:
        for statement in resolved.statements():
            typer.echo(statement + ";")
    else:
        import duckdb

        from dpone_dagster.errors import LakeError
        from dpone_dagster.lake.guarded import GuardedConnection
        from dpone_dagster.lake.sql import quote_ident
        from dpone_dagster.lake.sql_guard import SqlGuard

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
