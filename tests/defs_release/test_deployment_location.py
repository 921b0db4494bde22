"""The dormant deployment location over a real installed release: jobs, refusals, integrity."""

from __future__ import annotations

import dagster as dg
import pytest

from dpone_dagster.clock import SystemClock
from dpone_dagster.deployment.location import build_definitions
from dpone_dagster.errors import DponeError
from dpone_dagster.release.active import DeploymentLoadError, load_active_release, read_only_cache
from dpone_dagster.release.runtime.admission import RuntimeTask, TaskKind
from dpone_dagster.release.runtime.ports import AccessLedger, LedgeredCredentialResolver
from tests.synthetic_project import NATIVE_MODELS, ORDINARY_FLOWS, PRE_HOOKS


def _jobs(setup) -> dict[str, dg.JobDefinition]:
    defs = build_definitions(setup.settings)
    return {job.name: job for job in defs.resolve_all_job_defs() if not job.name.startswith("__")}


def test_every_task_of_the_installed_release_is_a_job(copied_release, env_of):
    jobs = _jobs(env_of(copied_release))
    kinds, synthetic = {}, {}
    for job in jobs.values():
        family = kinds if job.tags["dpone/family"] == "development" else synthetic
        family.setdefault(job.tags["dpone/task_kind"], []).append(job)
    assert {kind: len(found) for kind, found in kinds.items()} == {
        "native": NATIVE_MODELS,
        "ordinary": ORDINARY_FLOWS,
        "pre_hook": PRE_HOOKS,
    }
    assert {kind: len(found) for kind, found in synthetic.items()} == {"ordinary": 3, "pre_hook": 3}
    assert all(job.tags["dpone/dormant"] == "true" for found in kinds.values() for job in found)
    assert {job.tags["dpone/workspace"] for job in jobs.values()} == {"prod"}
    assert all(
        job.name.startswith("synthetic__") and job.tags["dpone/dormant"] == "false"
        for found in synthetic.values()
        for job in found
    )
    hooks = sorted(
        (job.metadata["hook_position"].value, job.metadata["hook_id"].value)
        for job in kinds["pre_hook"]
        if job.metadata["workload_id"].value == "orders_snapshot"
    )
    assert [position for position, _ in hooks] == ["1 of 2", "2 of 2"]
    runtime = jobs["ordinary__orders_snapshot"].metadata
    assert runtime["selector"].value == "flow:orders_snapshot"
    assert runtime["hook_order"].value == " -> ".join(hook for _, hook in hooks)
    assert runtime["resources.limits.cpu_millicores"].value > 0
    assert "(" in runtime["connection_aliases"].value
    native = next(iter(kinds["native"])).metadata
    assert native["selector"].value.startswith("dbt:dbt_project_synthetic:model.")


@pytest.mark.parametrize("job_name", ["native__model_dbt_project_synthetic_fct_orders", "ordinary__weekly_revenue"])
def test_launching_a_task_is_refused_before_any_credential(copied_release, env_of, monkeypatch, job_name):
    setup = env_of(copied_release)
    monkeypatch.setenv("DPONE_CONNECTION_FLOW_LAKE", "would-be-resolved")
    job = _jobs(setup)[job_name]
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE").event_specific_data
        assert failure.error.message.startswith("dagster._core.definitions.events.Failure: [release.execution_denied]")
        metadata = {k: v.value for k, v in failure.user_failure_data.metadata.items()}
        assert metadata["reason"] == "admission.development_dormant"
        assert metadata["credential_resolutions"] == 0
        assert metadata["runtime_port_uses"] == 0
        assert metadata["release_id"].startswith("sha256:")
        tags = instance.get_run_by_id(result.run_id).tags
        assert tags["dpone/admission"] == "denied"
        assert tags["dpone/authority_expires_at"] == metadata["authority_expires_at"]
    assert AccessLedger(setup.settings.access_ledger).entries(run_id=result.run_id) == []


def test_the_ledger_records_a_credential_resolution_when_one_happens(copied_release, env_of, monkeypatch):
    """Positive control: the ledger that reads zero above does see a resolution."""
    setup = env_of(copied_release)
    monkeypatch.setenv("DPONE_CONNECTION_FLOW_LAKE", "synthetic-credential")
    installed = load_active_release(read_only_cache(setup.settings, "synthetic-dev", SystemClock()))
    ledger = AccessLedger(setup.settings.access_ledger)
    resolver = LedgeredCredentialResolver(
        ledger=ledger, run_id="probe", release=installed.bundle, task=RuntimeTask(TaskKind.ORDINARY, "weekly_revenue")
    )
    assert resolver.resolve("flow_lake") == "synthetic-credential"
    assert [entry["port"] for entry in ledger.entries(run_id="probe")] == ["credentials"]


def test_revoked_authority_changes_the_denial_reason(copied_release, env_of):
    from dpone_dagster.contracts.base import parse_document
    from dpone_dagster.release.platform.target import ProtectedTargetDocument

    setup = env_of(copied_release)
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": target.revocation_epoch + 1}).canonical_bytes())
    with dg.instance_for_test() as instance:
        result = _jobs(setup)["ordinary__weekly_revenue"].execute_in_process(instance=instance, raise_on_error=False)
        assert instance.get_run_by_id(result.run_id).tags["dpone/denial_reason"] == "admission.authority_revoked"


def test_an_altered_installed_release_is_not_loaded(copied_release, env_of):
    setup = env_of(copied_release)
    members = next((setup.settings.cache_root / "synthetic-dev" / "deployments").iterdir()) / "members"
    victim = next(path for path in sorted(members.rglob("*.sql")))
    victim.write_bytes(victim.read_bytes() + b"-- altered\n")
    with pytest.raises(DeploymentLoadError) as raised:
        build_definitions(setup.settings)
    assert raised.value.code == "deployment.integrity_failed"
    assert "release.integrity_mismatch" in raised.value.message
    assert str(setup.state_dir) not in str(raised.value)


def test_nothing_installed_loads_an_empty_location(fresh, env_of):
    setup = env_of(fresh)
    assert list(build_definitions(setup.settings).resolve_all_job_defs()) == []


def test_the_location_cannot_write_the_cache_even_with_a_receipt_the_target_accepts(copied_release, env_of):
    from datetime import timedelta

    from dpone_dagster.authority.receipt_seal import PROCESS_SEAL
    from dpone_dagster.contracts.bounds import format_timestamp
    from dpone_dagster.contracts.receipts import ActivationReceipt
    from dpone_dagster.release.services import ReleaseAdmission

    setup = env_of(copied_release)
    cache = read_only_cache(setup.settings, "synthetic-dev", SystemClock())
    installed = load_active_release(cache)
    issuer = ReleaseAdmission(setup.settings).issuer()
    now = SystemClock().now()
    receipt = PROCESS_SEAL.seal(
        ActivationReceipt(  # sealed in this process, as the target's issuer would
            release_id=installed.bundle.release_id,
            deployment_id=installed.record.deployment_id,
            target_environment=issuer.target.environment,
            trust_tier="non_production",
            target_policy_digest=issuer.target.policy_digest,
            grant_digest=installed.record.grant_digest,
            revocation_epoch=installed.record.revocation_epoch,
            verified_at=format_timestamp(now - timedelta(minutes=1)),
            expires_at=format_timestamp(now + timedelta(minutes=10)),
            purpose="activate",
        )
    )
    admit = {
        "release_id": receipt.release_id,
        "deployment_id": receipt.deployment_id,
        "purpose": "activate",
        "authority": installed.record,
    }
    assert issuer.require_current(receipt, ActivationReceipt, **admit) is receipt
    with pytest.raises(DponeError) as raised:
        cache.admission.require_current(receipt, ActivationReceipt, **admit)
    assert raised.value.code == "admission.receipt_missing"
    with pytest.raises(DponeError):
        cache.activate(installed.bundle.release_id, receipt=receipt)
    assert load_active_release(cache).bundle.release_id == installed.bundle.release_id
