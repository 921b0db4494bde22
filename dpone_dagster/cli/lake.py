"""`dpone lake` commands: show exactly how a workspace attaches a lake, credentials redacted."""

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
) -> None:
    """Print the statements a job in WORKSPACE would run to attach LAKE (secrets redacted)."""
    from dpone_dagster.lake.resolve import resolve

    resolved = resolve(workspace_id, lake, targets=target)
    for statement in resolved.statements():
        typer.echo(statement + ";")
    for warning in resolved.warnings:
        typer.echo(f"-- warning: {warning}", err=True)
