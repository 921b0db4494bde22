"""The rollout gate: admission of every task checked before activation, blocking, with the acceptance report."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest

import dpone_dagster.release.runtime.admission as admission
from defs_release.conftest import check_results, materializations, step_failures
from dpone_dagster.clock import SystemClock
from dpone_dagster.control.store import open_store
from dpone_dagster.defs.release.gate import install_stage_gate
from dpone_dagster.defs.release.resources import release_pipeline, release_resources
from dpone_dagster.release.active import installed_admission_view, load_active_release, read_only_cache
from dpone_dagster.release.runtime.admission import AdmissionGrant, TaskKind
from dpone_dagster.release.runtime.catalog import dormant_tasks
from dpone_dagster.release.runtime.gate import evaluate_rollout_gate
from dpone_dagster.release.state import ReleaseDenials, ReleaseState, ReleaseStateMachine
from tests.synthetic_project import NATIVE_MODELS, TASKS


def _event_index(result, step_key: str) -> int:
    return next(
        i for i, e in enumerate(result.all_events) if e.step_key == step_key and e.event_type_value == "STEP_SUCCESS"
    )


def test_the_gate_runs_before_installation_and_counts_every_kind(released):
    passed, metadata, description = check_results(released.run)["rollout_gate"]
    assert passed, description
    assert {
        k: v for k, v in metadata.items() if ": " in k and k.split(": ")[0] in ("native", "ordinary", "pre_hook")
    } == {
        "native: admitted": 0,
        "native: denied": NATIVE_MODELS,
        "ordinary: admitted": 0,
        "ordinary: denied": 3,
        "pre_hook: admitted": 0,
        "pre_hook: denied": 3,
    }
    assert metadata["denied: admission.development_dormant"] == TASKS
    assert metadata["credential_resolutions"] == metadata["runtime_port_uses"] == 0
    assert _event_index(released.run, "published_release_rollout_gate") < _event_index(
        released.run, "installed_release"
    )


def test_the_install_stage_links_the_acceptance_report(released, env_of):
    setup = env_of(released)
    installed = materializations(released.run)["installed_release"]
    assert installed["rollout_gate"] == "passed"
    folder = setup.settings.acceptance_dir / installed["release_id"].removeprefix("sha256:")
    path = folder / f"{installed['acceptance_report_sha256']}.json"
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == installed["acceptance_report_sha256"]
    report = json.loads(data)
    assert report["verdict"] == "passed"
    assert report["release_id"] == installed["release_id"]
    assert report["authority_expires_at"] == installed["authority_expires_at"]
    assert report["grant_digest"].startswith("sha256:")
    assert report["port_uses"] == {"init_fetch": 0, "credentials": 0, "source": 0, "writer": 0}
    assert len(report["tasks"]) == TASKS
    assert {task["reason"] for task in report["tasks"]} == {"admission.development_dormant"}
    markdown = path.with_suffix(".md").read_text()
    assert "**Verdict: PASSED**" in markdown and installed["release_id"] in markdown


def test_gate_denials_are_persisted_and_the_active_release_is_denied(released, env_of):
    setup = env_of(released)
    states = ReleaseStateMachine(open_store(setup.settings.control_store_url), SystemClock())
    release_id = materializations(released.run)["installed_release"]["release_id"]
    records = ReleaseDenials(states, run_id=released.run.run_id, origin="-").records(
        release_id=release_id, run_id=released.run.run_id
    )
    origins = {origin: sum(1 for r in records if r.origin == origin) for origin in {r.origin for r in records}}
    assert origins == {"rollout_gate": TASKS, "install_stage": TASKS, "dormancy_check": TASKS}
    assert states.current(release_id) is ReleaseState.DENIED


def _admit_first_ordinary_task(monkeypatch):
    """Inject an admission that admits exactly one development task (the first ordinary one asked about)."""
    real = admission.admit
    admitted: list = []

    def admit_one(release, task, **kwargs):
        if task.kind is TaskKind.ORDINARY and (not admitted or admitted[0] == task):
            admitted[:1] = [task]
            return AdmissionGrant(release_id=release.release_id, task=task)
        return real(release, task, **kwargs)

    monkeypatch.setattr(admission, "admit", admit_one)


def test_a_single_admitted_task_fails_the_gate_service_level(released, env_of, monkeypatch):
    setup = env_of(released)
    installed = load_active_release(read_only_cache(setup.settings, "synthetic-dev", SystemClock()))
    _admit_first_ordinary_task(monkeypatch)
    result = evaluate_rollout_gate(
        installed_admission_view(installed),
        dormant_tasks(installed.bundle),
        clock=SystemClock(),
        epochs=SimpleNamespace(current_epoch=lambda: 0),
    )
    assert not result.passed
    assert (result.admitted, result.denied) == (1, TASKS - 1)
    assert result.by_kind()["ordinary"] == {"admitted": 1, "denied": 2}
    assert result.port_uses == {"init_fetch": 1}
    assert result.summary().startswith("ROLLOUT BLOCKED")


def test_the_install_stage_refuses_before_installing_when_the_gate_fails(copied_release, env_of, monkeypatch):
    setup = env_of(copied_release)
    resources = SimpleNamespace(
        **{key: definition.resource_fn(None) for key, definition in release_resources(setup.settings).items()}
    )
    pipeline, _ = release_pipeline(resources)
    installed = load_active_release(pipeline.cache)
    authority = SimpleNamespace(
        expires_at=installed.record.authority_expires_at,
        revocation_epoch=installed.record.revocation_epoch,
        environment="synthetic-dev",
    )
    audit_before = len(pipeline.cache.audit_log())
    _admit_first_ordinary_task(monkeypatch)
    with pytest.raises(Exception) as raised:
        install_stage_gate(resources, pipeline, installed.bundle, authority, run_id="install-probe")
    assert getattr(raised.value, "code", None) == "release.rollout_blocked"
    assert len(pipeline.cache.audit_log()) == audit_before


@pytest.mark.slow
def test_a_gate_that_admits_one_task_blocks_activation_in_the_release_job(fresh, env_of, monkeypatch):
    setup = env_of(fresh)
    _admit_first_ordinary_task(monkeypatch)
    result = setup.run_release()
    assert not result.success
    passed, metadata, description = check_results(result)["rollout_gate"]
    assert not passed and description.startswith("ROLLOUT BLOCKED")
    assert metadata["ordinary: admitted"] == 1 and metadata["admitted"] == 1
    assert metadata["runtime_port_uses"] == 1 and metadata["credential_resolutions"] == 0
    assert "installed_release" not in materializations(result)
    cache = setup.settings.cache_root / "synthetic-dev"
    assert not (cache / "current").exists() and not (cache / "deployments").exists()
    report = json.loads(next(setup.settings.acceptance_dir.glob("*/*.json")).read_bytes())
    assert report["verdict"] == "blocked"

    # Without any check selected, the install stage's own gate refuses before installing or activating.
    job = setup.definitions().resolve_job_def("release_job")
    unchecked = job.get_subset(asset_selection=set(job.asset_layer.executable_asset_keys), asset_check_selection=set())
    again = unchecked.execute_in_process(instance=setup.instance, raise_on_error=False)
    assert check_results(again) == {}
    assert "[release.rollout_blocked]" in step_failures(again)["installed_release"]
    assert not (cache / "current").exists() and not (cache / "deployments").exists()


def test_a_later_evaluation_never_overwrites_a_linked_report(released, env_of, tmp_path):
    """The install stage links a report by SHA-256; a later evaluation (new `evaluated_at`) writes its own."""
    from dataclasses import replace

    from dpone_dagster.release.runtime.gate import write_acceptance_report

    setup = env_of(released)
    installed = materializations(released.run)["installed_release"]
    folder = setup.settings.acceptance_dir / installed["release_id"].removeprefix("sha256:")
    linked = folder / f"{installed['acceptance_report_sha256']}.json"
    before = linked.read_bytes()
    first = write_acceptance_report(_result_from(json.loads(before)), tmp_path)
    later = write_acceptance_report(
        replace(_result_from(json.loads(before)), evaluated_at="2099-01-01T00:00:00Z"), tmp_path
    )
    assert first.json_path != later.json_path
    assert hashlib.sha256(first.json_path.read_bytes()).hexdigest() == first.json_sha256
    assert linked.read_bytes() == before


def _result_from(report: dict):
    from dpone_dagster.release.runtime.gate import GateResult

    return GateResult(
        release_id=report["release_id"],
        family=report["family"],
        authority_expires_at=report["authority_expires_at"],
        evaluated_at=report["evaluated_at"],
        verdicts=(),
        port_uses=report["port_uses"],
    )
