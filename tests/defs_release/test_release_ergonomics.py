"""Release runs are the same however they are launched, and leave no stage value in DAGSTER_HOME.

- The code location's default executor runs a run in process, and tags it `dpone/release`, when any
  of its steps is a release stage (op tag `dpone/in_process`): "Materialize all" on group `release`
  and `dagster asset materialize --select group:release` behave like `release_job`. Proved here with
  `execute_job` on a real instance (the executor `execute_in_process` would replace is the one
  under test); the same run through the webserver's GraphQL launch is in tests/ui/test_release_flow.py.
- Stage values live in the run's memory (`stage_values`): nothing under DAGSTER_HOME/storage, no
  `path` metadata; another run re-reads a published release from the registry, and refuses
  (`release.stage_value_unavailable`) what no registry holds.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from dagster._core.definitions.reconstruct import ReconstructableRepository

from dpone_dagster.defs.release.assets import GROUP, RELEASE_ASSETS, STAGE_TAGS
from dpone_dagster.defs.release.checks import RELEASE_CHECKS
from dpone_dagster.integration.binding import DEFAULT_EXECUTOR, IN_PROCESS_TAG, WORKSPACE_TAG, route_run

STAGES = {asset.key.to_user_string() for asset in RELEASE_ASSETS}


def step_failures(result) -> dict[str, str]:
    # not imported from .conftest: this file is also loaded by path, as a code location (`routing_defs`)
    return {
        e.step_key: e.event_specific_data.error.message
        for e in result.all_events
        if e.event_type_value == "STEP_FAILURE"
    }


# -- routing ---------------------------------------------------------------------------------


def test_every_release_stage_and_check_asks_for_in_process_and_the_release_tag():
    for definition in (*RELEASE_ASSETS, *RELEASE_CHECKS):
        assert definition.op.tags.get(IN_PROCESS_TAG) == "true", definition.op.name
        assert definition.op.tags.get("dpone/release") == "true", definition.op.name
    assert all(asset.group_names_by_key[asset.key] == GROUP for asset in RELEASE_ASSETS)


def test_route_run_asks_for_in_process_when_any_step_does():
    release, plain = SimpleNamespace(tags=dict(STAGE_TAGS)), SimpleNamespace(tags={})
    assert route_run(None, None, [plain, release]) is True
    assert route_run(None, None, [plain, plain]) is False
    assert route_run(None, None, []) is False


@dg.asset(op_tags=STAGE_TAGS)
def tagged_stage() -> dg.MaterializeResult:
    return dg.MaterializeResult()


@dg.asset
def plain_asset() -> dg.MaterializeResult:
    return dg.MaterializeResult()


routing_defs = dg.Definitions(assets=[tagged_stage, plain_asset], executor=DEFAULT_EXECUTOR)
"""What the code location serves, in small: the bound default executor and its implicit asset job."""


def _launched(instance: dg.DagsterInstance, keys: list[str]) -> tuple[dg.DagsterRun, list[str]]:
    """The implicit asset job ("Materialize selected"), reconstructable as a code server would load it."""
    repository = ReconstructableRepository.for_file(__file__, "routing_defs", str(Path(__file__).parent))
    job = repository.get_reconstructable_job("__ASSET_JOB")
    selection = [dg.AssetKey(key) for key in keys]
    with dg.execute_job(job, instance=instance, asset_selection=selection) as result:
        assert result.success
        run_id = result.run_id
    engine = [
        record.event_log_entry.message
        for record in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records
    ]
    return instance.get_run_by_id(run_id), engine


def test_the_default_executor_runs_a_release_selection_in_process_and_tags_it(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        run, engine = _launched(instance, ["tagged_stage"])
        assert any(message.startswith("Executing steps in process") for message in engine), engine
        assert run.tags["dpone/release"] == "true"
        assert WORKSPACE_TAG in run.tags


@pytest.mark.slow  # the multiprocess half starts a step process (~20 s on two busy cores)
def test_a_selection_without_release_stages_keeps_the_multiprocess_executor(tmp_path):
    with dg.DagsterInstance.local_temp(str(tmp_path)) as instance:
        run, engine = _launched(instance, ["plain_asset"])
        assert any("multiprocess executor" in message for message in engine), engine
        assert "dpone/release" not in run.tags
        mixed, engine = _launched(instance, ["plain_asset", "tagged_stage"])
        assert any(message.startswith("Executing steps in process") for message in engine), engine
        assert mixed.tags["dpone/release"] == "true"


# -- stage values ------------------------------------------------------------------------------


def test_a_release_run_leaves_no_stage_value_and_no_path_in_dagster_home(released):
    storage = Path(released.instance.root_directory) / "storage"
    written = [p for p in storage.rglob("*") if p.is_file()] if storage.exists() else []
    assert [p for p in written if set(p.parts) & STAGES] == []
    for event in released.run.get_asset_materialization_events():
        metadata = event.materialization.metadata
        assert "path" not in metadata, event.asset_key
        assert not [k for k, v in metadata.items() if str(getattr(v, "value", v)).startswith("/")], event.asset_key


def test_a_stage_whose_input_no_registry_holds_is_refused_with_a_stable_code(released):
    job = released.definitions().resolve_job_def("release_job")
    keys = [k for k in job.asset_layer.selected_asset_keys if k.to_user_string() == "development_release"]
    result = job.execute_in_process(instance=released.instance, asset_selection=keys, raise_on_error=False)
    assert not result.success
    messages = " ".join(step_failures(result).values())
    assert "[release.stage_value_unavailable]" in messages
    assert "native_workspace" in messages
