"""`dpone fork diff` and `dpone fork promote`, registered on the `dpone fork` group by `register`.

Thin wrappers over `lake/lifecycle/diff.py` and `lake/lifecycle/promote.py`; every refusal prints its stable code and
exits 1. What a reader could get wrong: the two run in different processes on purpose. `diff` runs
where the configured workspace is the fork (`DPONE_WORKSPACE=<fork>`) and prints the `diff_id` to
review; `promote` runs where the configured workspace is the fork's parent and needs that id.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import typer


def diff(
    workspace_id: str = typer.Argument(..., metavar="FORK"),
    tables: list[str] = typer.Argument(None, metavar="[TABLE]...", help="Default: every table the fork materialized."),
    key: list[str] = typer.Option(
        [], "--key", help="Primary-key column (repeatable); default: the model's dbt unique test."
    ),
    since_pin: bool = typer.Option(
        False,
        "--since-pin",
        help="Also count the parent's changes since the fork built each table (DuckLake change feed).",
    ),
    lake: str = typer.Option("main", "--lake"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Diff a fork's own tables against what its parent has (run in the fork's process)."""
    from dpone_dagster import api

    result = api.diff_fork(workspace_id, tables or (), lake=lake, key=key or None, since_pin=since_pin)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True))
        return
    typer.echo(result.markdown())
    typer.echo(
        f"\npromote from the parent's process: dpone fork promote {workspace_id} <table>... --diff-id {result.diff_id}"
    )


def promote(
    workspace_id: str = typer.Argument(..., metavar="FORK"),
    tables: list[str] = typer.Argument(..., metavar="TABLE..."),
    diff_id: str = typer.Option(..., "--diff-id", help="The diff id you reviewed (`dpone fork diff`)."),
    lake: str = typer.Option("main", "--lake"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Publish fork tables into the parent in one transaction (run in the parent's process)."""
    from dpone_dagster import api

    result = api.promote_fork(workspace_id, tables, diff_id, lake=lake)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True))
        return
    for table in result.tables:
        typer.echo(f"promoted {table.table} ({table.rows} rows) from {result.fork} into {result.parent}")
    typer.echo(f"parent snapshot {result.snapshot_id}, diff {result.diff_id}")


def register(app: typer.Typer, reported: Callable) -> None:
    """Add `diff` and `promote` to the `dpone fork` group (called by `cli/fork.py`, which owns `reported`)."""
    app.command("diff")(reported(diff))
    app.command("promote")(reported(promote))
