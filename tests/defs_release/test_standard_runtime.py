"""The standard runtime on a mixed deployment: synthetic-family tasks run for real, development tasks never
reach a port. Service level (counting ports) and through the Dagster jobs of the deployment location."""

from __future__ import annotations

import hashlib
import shutil
from collections import Counter

import dagster as dg
import duckdb
import pytest

from dpone_dagster.clock import SystemClock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.dispatch import DispatchError, read_production_document
from dpone_dagster.control.store import open_store
from dpone_dagster.deployment.location import build_definitions
from dpone_dagster.release.active import (
    installed_admission_view,
    load_active_release,
    load_synthetic_release,
    read_only_cache,
)
from dpone_dagster.release.build.bundle import PARENT_PATH, open_bundle
from dpone_dagster.release.errors import IntegrityError
from dpone_dagster.release.platform.target import ProtectedTargetDocument
from dpone_dagster.release.runtime.admission import (
    ExecutionDeniedError,
    StandardRuntimeLauncher,
    TaskKind,
    TaskPlan,
)
from dpone_dagster.release.runtime.catalog import dormant_tasks, synthetic_tasks
from dpone_dagster.release.runtime.ports import AccessLedger
from dpone_dagster.release.runtime.synthetic_campaign import compose_synthetic_release, shipped_source
from dpone_dagster.release.source.snapshot import open_source
from dpone_dagster.release.state import ReleaseDenials, ReleaseState, ReleaseStateMachine

LAKE_ENV = {"DPONE_CONNECTION_ORDERS_SOURCE": "orders_source.duckdb", "DPONE_CONNECTION_FLOW_LAKE": "flow_lake.duckdb"}


def _jobs(setup) -> dict[str, dg.JobDefinition]:
    return {
        job.name: job
        for job in build_definitions(setup.settings).resolve_all_job_defs()
        if not job.name.startswith("__")
    }


def _releases(setup):
    installed = load_active_release(read_only_cache(setup.settings, "synthetic-dev", SystemClock()))
    return installed, load_synthetic_release(setup.settings)


# ------------------------------------------------------------------ service level: counting ports


class CountingPorts:
    """Real-shaped ports that count every call: a plan with two aliases and one file, a writer that returns."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()

    def fetch(self, release_id, task):
        self.calls["init_fetch"] += 1
        return TaskPlan(aliases=("flow_lake", "orders_source"), source_paths=("sources/x/a.sql",))

    def resolve(self, alias):
        self.calls["credentials"] += 1
        return f"{alias}.duckdb"

    def read(self, release_id, path):
        self.calls["source"] += 1
        return b"select 1"

    def issue(self, release_id, task):
        self.calls["writer"] += 1
        return self

    def run(self, plan, credentials, sources):
        return {"statements": len(sources)}


class Target:
    def __init__(self, epoch: int, synthetic: bool = True) -> None:
        self.epoch, self.synthetic = epoch, synthetic

    def current_epoch(self) -> int:
        return self.epoch

    def synthetic_target(self) -> bool:
        return self.synthetic


def _launcher(ports: CountingPorts, target: Target) -> StandardRuntimeLauncher:
    return StandardRuntimeLauncher(
        clock=SystemClock(),
        epochs=target,
        init_fetcher=ports,
        credentials=ports,
        sources=ports,
        writers=ports,
        target=target,
    )


def test_admission_sits_before_every_port_development_zero_synthetic_more_than_zero(released, env_of):
    installed, synthetic = _releases(env_of(released))
    target = Target(installed.record.revocation_epoch)
    development = CountingPorts()
    launcher = _launcher(development, target)
    view = installed_admission_view(installed)
    for task in dormant_tasks(installed.bundle):
        with pytest.raises(ExecutionDeniedError) as raised:
            launcher.launch(view, task.runtime_task)
        assert raised.value.denial.reason.value == "admission.development_dormant"
    assert sum(development.calls.values()) == 0

    ran = CountingPorts()
    launcher = _launcher(ran, target)
    tasks = synthetic_tasks(synthetic.ordinary)
    for task in tasks:
        result = launcher.launch(synthetic.admission_view(), task.runtime_task)
        assert result.grant.reason == "admission.synthetic_admitted"
    assert ran.calls == {
        "init_fetch": len(tasks),
        "credentials": 2 * len(tasks),
        "source": len(tasks),
        "writer": len(tasks),
    }


def test_synthetic_tasks_are_refused_on_a_target_not_declared_synthetic(released, env_of):
    _, synthetic = _releases(env_of(released))
    ports = CountingPorts()
    launcher = _launcher(ports, Target(0, synthetic=False))
    task = synthetic_tasks(synthetic.ordinary)[0]
    with pytest.raises(ExecutionDeniedError) as raised:
        launcher.launch(synthetic.admission_view(), task.runtime_task)
    assert raised.value.denial.reason.value == "admission.synthetic_target_required"
    assert sum(ports.calls.values()) == 0


def test_the_synthetic_release_is_its_own_closed_family(released, env_of):
    installed, synthetic = _releases(env_of(released))
    assert synthetic.release_id != installed.bundle.release_id
    with pytest.raises(IntegrityError) as raised:
        open_bundle(synthetic.members)
    assert raised.value.code == "release.not_development_family"
    with pytest.raises(DispatchError) as refused:
        read_production_document(synthetic.members[PARENT_PATH])
    assert refused.value.code == "dispatch.family_refused"


def test_the_synthetic_release_is_never_derived_from_the_development_release(released, env_of):
    """Issue 20 item 1: the synthetic family runs the platform's pinned campaign, never development data."""
    installed, synthetic = _releases(env_of(released))
    with shipped_source() as path, open_source(path) as tree:
        assert synthetic.release_id == compose_synthetic_release(tree).release_id
    development = installed.bundle
    assert set(synthetic.parent.constituents).isdisjoint(
        c.constituent_id for c in development.parent.ordinary_constituents
    )

    def source_blobs(members):
        return {hashlib.sha256(data).hexdigest() for path, data in members.items() if path.startswith("sources/")}

    assert source_blobs(synthetic.members).isdisjoint(source_blobs(development.members))


# ------------------------------------------------------------------ through the Dagster jobs


def _step_output_metadata(result: dg.ExecuteInProcessResult) -> dict:
    event = next(e for e in result.all_events if e.event_type_value == "STEP_OUTPUT")
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def _failure(result: dg.ExecuteInProcessResult):
    return next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE").event_specific_data


def test_one_deployment_runs_synthetic_tasks_and_refuses_development_tasks(copied_release, env_of, monkeypatch):
    setup = env_of(copied_release)
    for key, value in LAKE_ENV.items():
        monkeypatch.setenv(key, value)
    jobs = _jobs(setup)
    ledger = AccessLedger(setup.settings.access_ledger)
    with dg.instance_for_test() as instance:
        ran = jobs["synthetic__ordinary__customer_order_counts"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert ran.success
        metadata = _step_output_metadata(ran)
        assert metadata["credential_resolutions"] == 2
        assert metadata["rows: flow_marts.customer_order_counts"] == 17
        assert [e["port"] for e in ledger.entries(run_id=ran.run_id)] == [
            "init_fetch",
            "credentials",
            "credentials",
            "source",
            "writer",
        ]
        assert instance.get_run_by_id(ran.run_id).tags["dpone/admission"] == "admitted"

        refused = jobs["ordinary__customer_order_counts"].execute_in_process(instance=instance, raise_on_error=False)
        assert not refused.success
        failure = _failure(refused)
        assert failure.error.message.startswith("dagster._core.definitions.events.Failure: [release.execution_denied]")
        assert {k: v.value for k, v in failure.user_failure_data.metadata.items()}["credential_resolutions"] == 0
        assert ledger.entries(run_id=refused.run_id) == []
        assert instance.get_run_by_id(refused.run_id).tags["dpone/denial_recorded"] == "control_store"
    lake = setup.settings.synthetic_runtime_root / "lake" / "flow_lake.duckdb"
    with duckdb.connect(str(lake), read_only=True) as conn:
        assert conn.execute("select sum(orders) from flow_marts.customer_order_counts").fetchone()[0] == 240

    states = ReleaseStateMachine(open_store(setup.settings.control_store_url), SystemClock())
    denials = ReleaseDenials(states, run_id=refused.run_id, origin="deployment_run").records(run_id=refused.run_id)
    assert [(d.reason, d.task_kind, d.workload_id) for d in denials] == [
        ("admission.development_dormant", "ordinary", "customer_order_counts")
    ]
    assert states.current(denials[0].release_id) is ReleaseState.DENIED
    assert states.history(denials[0].release_id)[-1].detail.find("deployment_run") >= 0


def _steps(result: dg.ExecuteInProcessResult) -> list[str]:
    return [e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"]


def test_on_a_fresh_lake_a_flow_job_runs_its_pre_hooks_first(copied_release, env_of, monkeypatch):
    """Issue 20 item 9: a flow never starts before its pre-hooks (daily_revenue's needs the schema its hook makes)."""
    setup = env_of(copied_release)
    for key, value in LAKE_ENV.items():
        monkeypatch.setenv(key, value)
    assert not (setup.settings.synthetic_runtime_root / "lake" / "flow_lake.duckdb").exists()
    jobs = _jobs(setup)
    with dg.instance_for_test() as instance:
        revenue = jobs["synthetic__ordinary__daily_revenue"].execute_in_process(instance=instance, raise_on_error=False)
        assert revenue.success, _failure(revenue).error.message
        assert _steps(revenue) == [
            "start__synthetic__pre_hook__daily_revenue__ensure_marts",
            "start__synthetic__ordinary__daily_revenue",
        ]
        metadata = _output_metadata(revenue, "start__synthetic__ordinary__daily_revenue")
        assert metadata["rows: flow_marts.daily_revenue"] > 0
        funnel = jobs["synthetic__ordinary__status_funnel"].execute_in_process(instance=instance, raise_on_error=False)
        assert _steps(funnel) == [
            "start__synthetic__pre_hook__status_funnel__ensure_staging",
            "start__synthetic__pre_hook__status_funnel__clear_staging",
            "start__synthetic__ordinary__status_funnel",
        ]
        clear = jobs["synthetic__pre_hook__status_funnel__clear_staging"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert _steps(clear) == [
            "start__synthetic__pre_hook__status_funnel__ensure_staging",
            "start__synthetic__pre_hook__status_funnel__clear_staging",
        ]
    lake = setup.settings.synthetic_runtime_root / "lake" / "flow_lake.duckdb"
    with duckdb.connect(str(lake), read_only=True) as conn:
        assert conn.execute("select sum(orders) from flow_marts.status_funnel").fetchone()[0] == 240
        assert (
            conn.execute("select count(*) from flow_staging.order_statuses").fetchone()[0] == 0
        )  # cleared after the run


def test_a_dormant_flow_job_stops_at_its_first_refused_pre_hook(copied_release, env_of):
    """The development family gets the same job shape; its first pre-hook is refused, nothing after it starts."""
    setup = env_of(copied_release)
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["ordinary__orders_snapshot"].execute_in_process(instance=instance, raise_on_error=False)
        failed = [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        started = [e.step_key for e in result.all_events if e.event_type_value == "STEP_START"]
    assert failed == started == ["start__pre_hook__orders_snapshot__ensure_staging"]
    assert "[release.execution_denied]" in _failure(result).error.message
    assert AccessLedger(setup.settings.access_ledger).entries(run_id=result.run_id) == []


def _output_metadata(result: dg.ExecuteInProcessResult, step: str) -> dict:
    event = next(e for e in result.all_events if e.event_type_value == "STEP_OUTPUT" and e.step_key == step)
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


@pytest.mark.parametrize(
    "hostile",
    [
        "copy (select 42 as leaked) to '{outside}/leak.csv';",  # a write: refused by DuckDB's sandbox and by Landlock
        "create table flow_marts.leak as select * from read_text('{outside}/secret.txt');",  # a read: DuckDB's sandbox
    ],
)
def test_a_synthetic_job_cannot_write_outside_its_lake_even_with_the_capture_check_removed(
    copied_release, env_of, monkeypatch, tmp_path, hostile
):
    """Issue 20 item 1, the floor: a hostile line that capture did NOT check still cannot leave the lake."""
    from devtools.pack_fixtures import rewrite_packs
    from dpone_dagster.release.build import packs
    from dpone_dagster.release.runtime.synthetic_release import SyntheticReleaseStore

    setup = env_of(copied_release)
    for key, value in LAKE_ENV.items():
        monkeypatch.setenv(key, value)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host data\n")
    hostile = hostile.format(outside=outside) + "\n"
    root = tmp_path / "campaign"
    with shipped_source() as path:
        shutil.copytree(path, root)
    sql = root / "flows/daily_revenue/sql/daily_revenue.sql"
    sql.write_text(sql.read_text() + hostile)
    checked = packs.flow_sql_writes
    monkeypatch.setattr(
        packs, "flow_sql_writes", lambda text, where: checked(text.replace(hostile, ""), where)
    )  # check removed
    rewrite_packs(root, check=False)
    with open_source(root) as tree:
        SyntheticReleaseStore(setup.settings.synthetic_runtime_root).install(
            compose_synthetic_release(tree, pinned_digest=tree.snapshot.digest)
        )
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["synthetic__ordinary__daily_revenue"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert not result.success
        assert "[runtime.statement_failed]" in _failure(result).error.message
    assert sorted(path.name for path in outside.iterdir()) == ["secret.txt"]
    with duckdb.connect(
        str(setup.settings.synthetic_runtime_root / "lake" / "flow_lake.duckdb"), read_only=True
    ) as conn:
        assert conn.execute("select count(*) from duckdb_tables() where table_name = 'leak'").fetchone()[0] == 0


@pytest.mark.parametrize(
    ("env", "code", "resolutions"),
    [
        ({}, "config.secret_missing", 1),
        ({**LAKE_ENV, "DPONE_CONNECTION_FLOW_LAKE": "../escape.duckdb"}, "runtime.connection_outside_sandbox", 2),
    ],
)
def test_a_failure_after_admission_is_a_clean_coded_failure(
    copied_release, env_of, monkeypatch, env, code, resolutions
):
    setup = env_of(copied_release)
    for key in LAKE_ENV:
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["synthetic__ordinary__customer_order_counts"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        failure = _failure(result)
    assert failure.error.message.startswith(f"dagster._core.definitions.events.Failure: [{code}]")
    assert "Traceback" not in failure.error.message
    metadata = {k: v.value for k, v in failure.user_failure_data.metadata.items()}
    assert metadata["error_code"] == code
    assert metadata["credential_resolutions"] == resolutions
    assert not (setup.settings.synthetic_runtime_root / "escape.duckdb").exists()


def test_a_target_no_longer_synthetic_refuses_synthetic_jobs_before_any_port(copied_release, env_of, monkeypatch):
    setup = env_of(copied_release)
    for key, value in LAKE_ENV.items():
        monkeypatch.setenv(key, value)
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"synthetic": False}).canonical_bytes())
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["synthetic__ordinary__customer_order_counts"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        assert (
            instance.get_run_by_id(result.run_id).tags["dpone/denial_reason"] == "admission.synthetic_target_required"
        )
    assert AccessLedger(setup.settings.access_ledger).entries(run_id=result.run_id) == []


def test_native_tasks_have_no_synthetic_counterpart(released, env_of):
    _, synthetic = _releases(env_of(released))
    assert {task.kind for task in synthetic_tasks(synthetic.ordinary)} == {TaskKind.ORDINARY, TaskKind.PRE_HOOK}


def test_every_runtime_code_is_documented():
    from pathlib import Path

    from dpone_dagster.release.build.flow_sql import FlowSqlError
    from dpone_dagster.release.runtime.gate import RolloutBlockedError
    from dpone_dagster.release.runtime.ports import RuntimePortError
    from dpone_dagster.release.runtime.sandbox import SandboxError
    from dpone_dagster.release.runtime.synthetic_release import SyntheticReleaseError

    doc = (Path(__file__).resolve().parents[2] / "docs" / "federation.md").read_text(encoding="utf-8")
    classes = (RuntimePortError, SyntheticReleaseError, RolloutBlockedError, SandboxError, FlowSqlError)
    codes = [code for cls in classes for code in cls.codes]
    assert [code for code in codes if f"`{code}`" not in doc] == []


@pytest.mark.parametrize(
    ("task", "synthetic_target", "outcome"),
    [
        (("ordinary", "flow_a", None, False), True, "admission.synthetic_admitted"),
        (("pre_hook", "flow_a", "flow_a.prepare", False), True, "admission.synthetic_admitted"),
        (("ordinary", "flow_a", None, False), False, "admission.synthetic_target_required"),
        (("pre_hook", "flow_a", "flow_a.prepare", True), True, "admission.task_shape_invalid"),
        (("native", "model.x.y", None, False), True, "admission.unknown_task"),
        (("ordinary", "not_a_member", None, False), True, "admission.unknown_task"),
    ],
)
def test_synthetic_family_admission_is_narrow(task, synthetic_target, outcome):
    from datetime import UTC, datetime

    from dpone_dagster.release.runtime.admission import RuntimeTask, admit, sealed_view

    members = frozenset(
        {RuntimeTask(TaskKind.ORDINARY, "flow_a"), RuntimeTask(TaskKind.PRE_HOOK, "flow_a", "flow_a.prepare")}
    )
    view = sealed_view("sha256:" + "0" * 64, "synthetic", None, 0, members)
    kind, workload, hook, xcom = task
    decision = admit(
        view,
        RuntimeTask(TaskKind(kind), workload, hook, xcom),
        now=datetime.now(UTC),
        current_revocation_epoch=0,
        synthetic_target=synthetic_target,
    )
    assert (decision.reason if isinstance(decision.reason, str) else decision.reason.value) == outcome
    assert decision.admitted is (outcome == "admission.synthetic_admitted")
    development = sealed_view(view.release_id, "development", datetime(2999, 1, 1, tzinfo=UTC), 0, members)
    assert not admit(
        development,
        RuntimeTask(TaskKind.ORDINARY, "flow_a"),
        now=datetime.now(UTC),
        current_revocation_epoch=0,
        synthetic_target=True,
    ).admitted


def test_a_connection_that_cannot_be_opened_is_a_clean_coded_failure(copied_release, env_of, monkeypatch):
    setup = env_of(copied_release)
    (setup.settings.synthetic_runtime_root / "lake" / "blocked.duckdb").mkdir(parents=True)
    for key, value in {**LAKE_ENV, "DPONE_CONNECTION_FLOW_LAKE": "blocked.duckdb"}.items():
        monkeypatch.setenv(key, value)
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["synthetic__ordinary__customer_order_counts"].execute_in_process(
            instance=instance, raise_on_error=False
        )
        failure = _failure(result)
    assert failure.error.message.startswith(
        "dagster._core.definitions.events.Failure: [runtime.connection_unavailable]"
    )
