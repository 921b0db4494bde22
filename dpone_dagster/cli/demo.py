"""`dpone demo` and `dpone prepare`: the top-level commands behind `make demo` and `make dev`.

`prepare` parses the dbt project into its manifest once (skipped when the manifest matches the
sources). `demo` prepares, materializes every dbt asset of dbt_project_synthetic into the configured
workspace's `main` lake (the embedded DuckLake under `.dpone/` unless `dpone.yaml` says otherwise)
through the same Dagster definitions `make dev` serves (the location module loaded by name,
`dpone_dagster.cli.location`, never imported statically), prints where the lake lives and how many
rows each of its tables holds, then runs that location's release group end to end (`release_job`)
and prints the installed release identity, what publication wrote, and the runtime admission
result: every task denied, zero credential resolutions. Last, the fork part (`cli/demo_fork.py`):
it recreates the throwaway fork `wm-fork-demo`, builds one model in it with its upstreams deferred
to prod, prints the fork's status and how to open its UI and drop it. Run inside a fork, the demo
builds every model there and skips the release and the fork part, saying so.

What a reader could get wrong: the demo runs in the configured workspace's own Dagster instance
(`DAGSTER_HOME` if set, else `.dpone/dagster_home` for prod and
`.dpone/workspaces/<fork>/dagster_home` for a fork), so its runs show up in that workspace's `make
dev` and in no other workspace's. A second demo is an identical retry: same release identity, zero
bytes written.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from dpone_dagster.cli.demo_fork import show_fork
from dpone_dagster.config import DEFAULT_LAKE, load_config
from dpone_dagster.contracts.workspace_ids import ROOT_WORKSPACE
from dpone_dagster.errors import DponeError

if TYPE_CHECKING:
    import dagster as dg

    from dpone_dagster.release.run_summary import ReleaseRunSummary


@dataclass(frozen=True)
class TableRows:
    schema: str
    table: str
    kind: str
    rows: int


def lake_table_rows(lake: str = DEFAULT_LAKE) -> tuple[str, list[TableRows]]:
    """(alias, rows of every table and view) of `lake` as the configured workspace sees it."""
    from dpone_dagster.lake import duck
    from dpone_dagster.lake.guard.statement import quote_ident
    from dpone_dagster.lake.resolution.seam import resolve

    config = load_config()
    resolved = resolve(config.workspace, lake, config=config)
    conn = duck.connect()
    try:
        resolved.apply(conn)
        listed = conn.execute(
            "SELECT table_schema, table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = ? ORDER BY 1, 2",
            [resolved.alias],
        ).fetchall()
        out = []
        for schema, table, kind in listed:
            name = f"{quote_ident(resolved.alias)}.{quote_ident(schema)}.{quote_ident(table)}"
            (rows,) = conn.execute(f"SELECT count(*) FROM {name}").fetchone()
            out.append(TableRows(schema, table, "view" if kind == "VIEW" else "table", rows))
        return resolved.alias, out
    finally:
        conn.close()


def _shown_path(text: str, root: Path) -> str:
    if "://" in text:
        return text
    try:
        return str(Path(text).relative_to(root)) + ("/" if text.endswith("/") else "")
    except ValueError:
        return text


def lake_location_lines(lake: str = DEFAULT_LAKE) -> list[str]:
    from dpone_dagster.lake.resolution.seam import resolve

    config = load_config()
    resolved = resolve(config.workspace, lake, config=config)
    catalog = resolved.catalog
    where = _shown_path(catalog.target, config.project_root) if catalog.kind == "duckdb" else catalog.target
    lines = [
        f"lake {resolved.lake!r} for workspace {resolved.workspace_id!r} (attached as {resolved.alias})",
        f"  catalog: {catalog.kind} {where}",
        f"  data:    {_shown_path(resolved.data_path, config.project_root)}",
    ]
    if resolved.fork_mode:
        lines.append(f"  fork namespace: {resolved.namespace}")
    return lines


def demo_instance():
    """The configured workspace's own Dagster instance (the one `make dev` / `dpone dev` serves).

    `DAGSTER_HOME` if set (refused when it is another workspace's), else the workspace's embedded home."""
    from dagster import DagsterInstance

    from dpone_dagster.workspaces.dagster_home import prepare_dagster_home

    home = prepare_dagster_home(load_config(), os.environ)
    return DagsterInstance.from_config(str(home.path))


def materialize_dbt_assets(instance, location: dg.Definitions, selection: str | None = None) -> int:
    """Materialize the location's unpartitioned DuckLake assets (the dbt models) in one run, or only the
    one whose asset key is `selection` (`main/marts/fct_orders`); returns the materialized asset count."""
    from dagster import AssetKey, materialize

    from dpone_dagster.cli.location import lake_assets

    assets = lake_assets(location)
    if not assets:
        raise DponeError("the code location has no unpartitioned DuckLake assets", code="demo.materialization_failed")
    result = materialize(
        assets,
        resources=dict(location.resources or {}),
        instance=instance,
        selection=[AssetKey.from_user_string(selection)] if selection else None,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    if not result.success:
        raise DponeError(
            f"the dbt materialization failed (run {result.run_id}); see `make dev` or the log above",
            code="demo.materialization_failed",
        )
    failed_checks = [c for c in result.get_asset_check_evaluations() if not c.passed]
    if failed_checks:
        raise DponeError(f"{len(failed_checks)} dbt test(s) failed", code="demo.checks_failed")
    return len(result.get_asset_materialization_events())


@dataclass(frozen=True)
class ReleaseOutcome:
    """What the demo's release run did, as its materializations report it."""

    summary: ReleaseRunSummary
    already_published: bool
    bytes_written: int
    objects_written: int
    activated: bool

    def lines(self) -> list[str]:
        if self.already_published:
            published = f"  registry: already published, {self.bytes_written} bytes written (identical retry)"
        else:
            published = f"  registry: published {self.bytes_written} bytes in {self.objects_written} objects"
        installed = "  cache: activated" if self.activated else "  cache: already the active deployment"
        first, *rest = self.summary.lines()
        header = (
            f"release_job (run {self.summary.run_id[:8]}): policy, grant, compile, capture, compose, publish, install"
        )
        return [header, first, published, installed, *rest]


def run_release(instance, location: dg.Definitions) -> ReleaseOutcome:
    """Run the location's release group end to end (`release_job`) and read what its stages reported."""
    from dagster import DagsterEventType

    from dpone_dagster.api_release import run_release_job

    summary = run_release_job(location, instance)
    reported = {
        entry.dagster_event.asset_key.to_user_string(): {
            key: value.value for key, value in entry.asset_materialization.metadata.items()
        }
        for entry in instance.all_logs(summary.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION)
    }
    published, installed = reported["published_release"], reported["installed_release"]
    return ReleaseOutcome(
        summary=summary,
        already_published=bool(published["already_published"]),
        bytes_written=int(published["bytes_written"]),
        objects_written=int(published["objects_written"]),
        activated=bool(installed["activated"]),
    )


def prepare(force: bool = typer.Option(False, help="Parse even if the manifest is current.")) -> None:
    """Prepare the dbt manifest of dbt_project_synthetic (skipped when it is current)."""
    from dpone_dagster.integration.dbt.project import prepare_manifest

    _run(lambda: typer.echo("dbt manifest parsed" if prepare_manifest(force=force) else "dbt manifest is current"))


def demo(
    fork_step: str = typer.Option(
        None, "--fork-step", hidden=True, help="Internal: the fork part's build of this one asset, in the demo fork."
    ),
) -> None:
    """Build every dbt model into the main lake, deliver a dormant development release, then show a fork."""
    from dpone_dagster.cli.location import load_location
    from dpone_dagster.integration.dbt.project import prepare_manifest

    def run() -> None:
        prepare_manifest()
        location = load_location()
        instance = demo_instance()
        if fork_step:  # the child process of the fork part (cli/demo_fork.py), acting for the demo fork
            fork_step_build(instance, location, fork_step)
            return
        count = materialize_dbt_assets(instance, location)
        typer.echo(f"materialized {count} dbt assets")
        for line in lake_location_lines():
            typer.echo(line)
        _, tables = lake_table_rows()
        width = max((len(f"{t.schema}.{t.table}") for t in tables), default=10)
        for t in tables:
            suffix = "" if t.kind == "table" else f"  ({t.kind})"
            typer.echo(f"  {t.schema + '.' + t.table:<{width}}  {t.rows:>8} rows{suffix}")
        if load_config().workspace != ROOT_WORKSPACE:  # a fork's confined process may not write the release platform
            typer.echo(
                "release: not delivered from a fork (run `make demo` in prod; docs/forks.md, kernel confinement)"
            )
            typer.echo("fork part: shown from prod only (there `make demo` builds one model in wm-fork-demo)")
            return
        for line in run_release(instance, location).lines():
            typer.echo(line)
        show_fork(load_config())

    _run(run)


def fork_step_build(instance, location: dg.Definitions, asset_key: str) -> None:
    """Build one asset in the configured fork (the fork part's child process); refused in prod."""
    from dpone_dagster.cli.demo_fork import DEMO_FORK, DemoForkError

    workspace = load_config().workspace
    if workspace != DEMO_FORK:
        raise DemoForkError(
            "demo.fork_step_misplaced", f"--fork-step builds in the demo fork {DEMO_FORK!r} only, not in {workspace!r}"
        )
    count = materialize_dbt_assets(instance, location, selection=asset_key)
    typer.echo(f"materialized {count} dbt asset(s) in {workspace}")


def _run(action) -> None:
    try:
        action()
    except DponeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    """Attach the top-level commands to the `dpone` app."""
    app.command("prepare")(prepare)
    app.command("demo")(demo)
