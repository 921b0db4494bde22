"""The workspace belongs to the deployment (issue 9, reproduction 1), in-process.

A process acting for a fork (`DPONE_WORKSPACE=<fork>`) is asked, every way a launch can ask, to act
for `prod` instead: run config on the `ducklake` resource, run config on the `dbt` resource, a
`dpone/workspace` run tag, a drop of the fork's parent. Each is refused (config validation, or
`workspace.not_this_deployment` before any lake is attached), and `prod`'s snapshots, catalog
files and stored files are byte-for-byte what they were. Without an override the fork's own table
is written and the run carries `dpone/workspace=<fork>`.

The same launch through a real webserver's GraphQL `launchRun` is in `tests/ui/test_workspace_binding_ui.py`.
"""

from __future__ import annotations

import pytest
from dagster import (
    AssetKey,
    DagsterInstance,
    DagsterInvalidConfigError,
    MaterializeResult,
    asset,
    execute_job,
    instance_for_test,
    job,
    materialize,
    op,
    reconstructable,
    validate_run_config,
)
from dagster_dbt import DbtCliResource

from dpone_dagster.config import load_config
from dpone_dagster.integration.binding import (
    DEFAULT_EXECUTOR,
    WORKSPACE_TAG,
    BoundExecutorDefinition,
    WorkspaceNotThisDeploymentError,
)
from dpone_dagster.integration.lake.jobs import build_drop_fork_job
from dpone_dagster.integration.lake.resources import DuckLakeResource
from dpone_dagster.workspaces.service import Workspaces

from .lakes import LakeEnv, fingerprint, run_error_text, run_sql
from .lakes import materialize as managed_materialize

FORK = "wm-fork-bind"
SIBLING = "wm-fork-sibling"
OVERRIDE = {"resources": {"ducklake": {"config": {"workspace": "prod"}}}}
NOT_THIS_DEPLOYMENT = "workspace.not_this_deployment"


@asset
def orders(ducklake: DuckLakeResource) -> MaterializeResult:
    """Writes 7 rows; prod's table (built by `_prod_with_orders`) has 25."""
    with ducklake.connect("main", targets=["orders"]) as conn:
        conn.execute("CREATE OR REPLACE TABLE orders AS SELECT range AS id FROM range(7)")
        return MaterializeResult(metadata=ducklake.record_materialization(conn, "orders"))


@op
def touch_nothing() -> None:
    """An op that uses no resource: only the executor can check this run's workspace."""


@job(executor_def=DEFAULT_EXECUTOR)
def plain_job() -> None:
    touch_nothing()


@pytest.fixture
def fork_process(embedded_lake: LakeEnv, monkeypatch) -> LakeEnv:
    """prod's `orders` built (25 rows), a fork of prod created, and this process acting for the fork."""
    managed_materialize(embedded_lake, "prod", "main.orders", "SELECT range AS id FROM range(25)")
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    return embedded_lake


def _prod_rows(env: LakeEnv) -> int:
    return run_sql(env, "prod", "SELECT 1", fetch="SELECT count(*) FROM lake_main.main.orders")[0][0]


def _attaches(monkeypatch) -> list[str]:
    """Record every workspace the `ducklake` resource resolves (a resolve precedes every attach)."""
    seen: list[str] = []
    from dpone_dagster.lake.resolution import seam

    real = seam.resolve  # the resource imports it from the seam when it resolves

    def recording(workspace, *args, **kwargs):
        seen.append(workspace)
        return real(workspace, *args, **kwargs)

    monkeypatch.setattr(seam, "resolve", recording)
    return seen


def test_the_ducklake_resource_has_no_field_that_could_name_a_workspace():
    assert DuckLakeResource.model_fields == {}
    schema_fields = DuckLakeResource().get_resource_definition().config_schema.config_type.fields
    assert schema_fields == {}


def test_run_config_naming_prod_is_refused_and_prod_is_unchanged(fork_process, monkeypatch):
    before, rows = fingerprint(fork_process), _prod_rows(fork_process)
    seen = _attaches(monkeypatch)

    with pytest.raises(DagsterInvalidConfigError, match="workspace"):
        materialize([orders], resources={"ducklake": DuckLakeResource()}, run_config=OVERRIDE)

    assert seen == []
    assert fingerprint(fork_process) == before and rows == 25


def test_without_an_override_the_fork_is_written_and_the_run_is_tagged(fork_process, monkeypatch):
    before = fingerprint(fork_process)
    seen = _attaches(monkeypatch)
    with DagsterInstance.ephemeral() as instance:
        result = materialize([orders], resources={"ducklake": DuckLakeResource()}, instance=instance)
        assert result.success
        assert instance.get_run_by_id(result.run_id).tags[WORKSPACE_TAG] == FORK

    [event] = result.get_asset_materialization_events()
    metadata = {k: v.value for k, v in event.materialization.metadata.items()}
    assert metadata["workspace"] == FORK and metadata["fork_state"] == "fork_materialized"
    assert set(seen) == {FORK}
    assert run_sql(fork_process, FORK, "SELECT 1", fetch="SELECT count(*) FROM lake_main.main.orders") == [(7,)]
    assert fingerprint(fork_process) == before and _prod_rows(fork_process) == 25


def test_a_run_tagged_for_prod_is_refused_before_any_attach(fork_process, monkeypatch):
    before = fingerprint(fork_process)
    seen = _attaches(monkeypatch)

    result = materialize(
        [orders], resources={"ducklake": DuckLakeResource()}, tags={WORKSPACE_TAG: "prod"}, raise_on_error=False
    )

    assert not result.success
    refusal = run_error_text(result)
    assert NOT_THIS_DEPLOYMENT in refusal and "'wm-fork-bind'" in refusal
    assert seen == []
    assert fingerprint(fork_process) == before and _prod_rows(fork_process) == 25


def test_a_run_tagged_for_its_own_workspace_runs(fork_process):
    result = materialize([orders], resources={"ducklake": DuckLakeResource()}, tags={WORKSPACE_TAG: FORK})
    assert result.success


def test_the_executor_checks_and_stamps_runs_that_use_no_lake(monkeypatch):
    """The code location's executor (what `__ASSET_JOB` and the defined jobs run on) binds every run."""
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    in_process = {"execution": {"config": {"in_process": {}}}}
    with instance_for_test() as instance:
        with execute_job(reconstructable(plain_job), instance, run_config=in_process) as stamped:
            assert stamped.success
            assert instance.get_run_by_id(stamped.run_id).tags[WORKSPACE_TAG] == FORK
        with execute_job(
            reconstructable(plain_job), instance, run_config=in_process, tags={WORKSPACE_TAG: "prod"}
        ) as refused:
            assert not refused.success
            assert NOT_THIS_DEPLOYMENT in run_error_text(refused)
            assert not [e for e in refused.all_events if e.is_step_start]


def test_the_code_location_refuses_run_config_on_ducklake_and_every_dbt_field():
    """Against the real definitions: neither resource accepts any run configuration."""
    from dpone_dagster.definitions import defs

    asset_job = defs.resolve_implicit_global_asset_job_def()
    model = AssetKey(["main", "staging", "stg_customers"])
    assert model in {key for key in asset_job.asset_layer.asset_graph.get_all_asset_keys()}
    with pytest.raises(DagsterInvalidConfigError, match="workspace"):
        validate_run_config(asset_job, OVERRIDE)
    for field in sorted(DbtCliResource.model_fields):
        with pytest.raises(DagsterInvalidConfigError):
            validate_run_config(asset_job, {"resources": {"dbt": {"config": {field: "x"}}}})
    validate_run_config(asset_job, {})


def test_every_defined_job_carries_the_deployment_workspace_tag():
    from dpone_dagster.definitions import defs

    repository = defs.get_repository_def()
    jobs = {j.name: j for j in repository.get_all_jobs() if not j.name.startswith("__")}
    assert {"drop_fork_job", "fork_state_observation_job", "release_job"} <= set(jobs)
    for name, job_def in jobs.items():
        assert job_def.run_tags.get(WORKSPACE_TAG) == load_config().workspace, name


def test_every_job_of_the_code_location_runs_on_a_bound_executor():
    """A job that names a plain executor would start runs nobody checks or stamps (use IN_PROCESS_EXECUTOR)."""
    from dpone_dagster.definitions import defs

    jobs = defs.get_repository_def().get_all_jobs()
    assert "__ASSET_JOB" in {j.name for j in jobs}
    unbound = sorted(j.name for j in jobs if not isinstance(j.executor_def, BoundExecutorDefinition))
    assert unbound == []


def test_a_fork_deployment_cannot_drop_its_parent_or_a_sibling(embedded_lake, monkeypatch):
    workspaces = Workspaces(load_config())
    workspaces.create_fork(FORK, "prod", owner="alice")
    workspaces.create_fork(SIBLING, "prod", owner="alice")
    workspaces.create_fork("wm-fork-child", FORK, owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)

    def drop(workspace_id: str):
        config = {"workspace_id": workspace_id, "actor": "alice"}
        return build_drop_fork_job().execute_in_process(
            run_config={"ops": {"drop_fork_namespaces_op": {"config": config}}}, raise_on_error=False
        )

    refused = drop(SIBLING)
    assert not refused.success
    assert NOT_THIS_DEPLOYMENT in run_error_text(refused)
    assert {w.id for w in workspaces.list()} == {"prod", FORK, SIBLING, "wm-fork-child"}

    assert drop("wm-fork-child").success
    monkeypatch.delenv("DPONE_WORKSPACE")
    assert drop(SIBLING).success
    assert {w.id for w in workspaces.list()} == {"prod", FORK}


def test_the_refusal_is_a_typed_error():
    error = WorkspaceNotThisDeploymentError("x")
    assert error.code == NOT_THIS_DEPLOYMENT and str(error).startswith(f"[{NOT_THIS_DEPLOYMENT}]")
