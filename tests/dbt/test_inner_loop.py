"""The fork inner loop's fixed costs, removed with Dagster's own mechanisms:

- a dbt-only run executes in the run worker (`dpone/in_process_alone` on the dbt op): no step
  process that loads the definitions a second time; mixed with other steps, the configured
  (multiprocess) executor is kept;
- a run or step worker never runs `dbt parse` while it loads the definitions, even after a model
  edit: it trusts the manifest the code location loaded with; the dbt op then refreshes the manifest
  by a partial parse for its read set only (tests/dbt/test_manifest_follows_files.py).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableRepository

from dpone_dagster.integration.binding import DEFAULT_EXECUTOR, IN_PROCESS_ALONE_TAG, route_run

ALONE = {IN_PROCESS_ALONE_TAG: "true"}


def test_the_dbt_op_may_run_in_process_when_alone():
    from dpone_dagster.defs.dbt.assets import synthetic_dbt_assets

    assert synthetic_dbt_assets.op.tags.get(IN_PROCESS_ALONE_TAG) == "true"


def test_route_run_goes_in_process_only_when_every_step_may():
    alone, plain = SimpleNamespace(tags=dict(ALONE)), SimpleNamespace(tags={})
    assert route_run(None, None, [alone]) is True
    assert route_run(None, None, [alone, alone]) is True
    assert route_run(None, None, [alone, plain]) is False
    assert route_run(None, None, []) is False


@dg.asset(op_tags=ALONE)
def dbt_like() -> dg.MaterializeResult:
    return dg.MaterializeResult()


@dg.asset
def other_asset() -> dg.MaterializeResult:
    return dg.MaterializeResult()


inner_loop_defs = dg.Definitions(assets=[dbt_like, other_asset], executor=DEFAULT_EXECUTOR)


def _engine_messages(instance, keys: list[str]) -> list[str]:
    repository = ReconstructableRepository.for_file(__file__, "inner_loop_defs", str(Path(__file__).parent))
    job = repository.get_reconstructable_job("__ASSET_JOB")
    with dg.execute_job(job, instance=instance, asset_selection=[dg.AssetKey(k) for k in keys]) as result:
        assert result.success
        run_id = result.run_id
    return [
        r.event_log_entry.message
        for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records
    ]


def test_a_dbt_only_run_executes_in_the_run_worker(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        engine = _engine_messages(instance, ["dbt_like"])
        assert any(m.startswith("Executing steps in process") for m in engine), engine


@pytest.mark.slow  # starts step processes (~20 s on two busy cores)
def test_a_mixed_run_keeps_the_multiprocess_executor(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        engine = _engine_messages(instance, ["dbt_like", "other_asset"])
        assert any("multiprocess executor" in m for m in engine), engine


@pytest.mark.parametrize(
    ("argv", "worker"),
    [
        (["/x/dagster/__main__.py", "api", "execute_run", "{}"], True),
        (["/x/dagster/__main__.py", "api", "execute_step", "{}"], True),
        (["/x/dagster/__main__.py", "api", "resume_run", "{}"], True),
        (["/x/dagster/__main__.py", "api", "grpc", "-m", "dpone_dagster.definitions"], False),
        (["/x/bin/dagster", "asset", "materialize", "-m", "dpone_dagster.definitions"], False),
    ],
)
def test_run_and_step_workers_are_recognised(argv, worker):
    from dpone_dagster.integration.dbt.project import in_run_worker

    assert in_run_worker(argv, spawned=False) is worker


def _report_in_run_worker(queue) -> None:
    from dpone_dagster.integration.dbt.project import in_run_worker

    queue.put(in_run_worker())


def test_a_run_a_code_server_spawns_is_a_run_worker(monkeypatch):
    """A UI/GraphQL launch runs in a multiprocessing child of `dagster api grpc` (same argv)."""
    import multiprocessing

    from dpone_dagster.integration.dbt.project import in_run_worker

    grpc = ["/x/dagster/__main__.py", "api", "grpc", "--socket", "/tmp/s"]
    assert in_run_worker(grpc, spawned=True) is True
    monkeypatch.setattr("sys.argv", grpc)
    assert in_run_worker() is False  # the code server itself parses
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_report_in_run_worker, args=(queue,))
    child.start()
    child.join(60)
    assert queue.get(timeout=10) is True


def test_a_run_worker_never_parses_even_after_a_model_edit(monkeypatch, prepared_manifest):
    from dpone_dagster.integration.dbt import project as project_module

    parsed: list[str] = []

    class NoParse:
        def __init__(self, **kwargs) -> None:
            parsed.append("constructed")

        def cli(self, *args, **kwargs):
            parsed.append("parse")
            raise AssertionError("dbt parse ran in a run worker")

    monkeypatch.setattr(project_module, "InstalledDbtCliResource", NoParse)
    monkeypatch.setattr(project_module, "project_fingerprint", lambda _dir: "edited-since")
    project = project_module.configured_dbt_project()
    assert not project_module.manifest_is_current(project)  # as after an edit

    monkeypatch.setattr("sys.argv", ["/x/dagster/__main__.py", "api", "execute_run", "{}"])
    assert project_module.prepare_manifest(project) is False
    assert parsed == []

    monkeypatch.setattr("sys.argv", ["/x/dagster/__main__.py", "api", "grpc"])  # the code server does parse
    with pytest.raises(AssertionError, match="dbt parse ran"):
        project_module.prepare_manifest(project)
