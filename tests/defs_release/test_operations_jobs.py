"""The operator operations as Dagster jobs and `dpone release ...` commands, on a real installed release.

Each test works on a private copy of the session's `release_job` state (`copied_release`). The fault
is real: an activation killed between its durable intent and its pointer write. After it,
`release_job` refuses (`release.activation_recovery_required`) until `dpone release recover` or
`release_recover_job` restores a consistent, audited deployment.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dpone_dagster.cli import app
from dpone_dagster.defs.release.resources import AuthorityPlatform
from dpone_dagster.release.delivery.registry import blob_key
from dpone_dagster.release.services import ReleasePlatform, compose_release_services
from dpone_dagster.release.source.local_files import LocalFiles
from tests.defs_release.conftest import materializations, step_failures


class KilledBeforePointer(LocalFiles):
    def replace(self, path, data):
        raise OSError("killed between intent and pointer write")


def operations_of(setup):
    """The operations service as `dpone release ...` composes it.

    The jobs hand their resources to the same function.
    """
    return compose_release_services(ReleasePlatform.from_settings(setup.settings)).operations


def kill_activation_midway(setup) -> str:
    """Re-activate the installed release with a pointer write that dies: a pending intent remains."""
    ops = operations_of(setup)
    release_id = ops.cache.current().release_id
    receipt = ops._activation_receipt(ops.cache.load(release_id).bundle, "activate")
    ops.cache.files = KilledBeforePointer()
    with pytest.raises(Exception) as raised:
        ops.cache.activate(release_id, receipt=receipt)
    assert raised.value.code == "release.activation_recovery_required"
    assert ops.cache.pending() is not None
    return release_id


def run_install(setup, released):
    """`release_job`'s install stage (its inputs from the session run's stored outputs)."""
    job = setup.definitions().resolve_job_def("release_job")
    keys = [k for k in job.asset_layer.selected_asset_keys if k.to_user_string() == "installed_release"]
    return job.execute_in_process(instance=released.instance, asset_selection=keys, raise_on_error=False)


def cli(*args: str):
    return CliRunner().invoke(app, ["release", *args], catch_exceptions=False)


@pytest.fixture
def copied(copied_release, env_of):
    return env_of(copied_release)


def test_killed_activation_blocks_release_job_until_cli_recover_restores_it(copied, released):
    release_id = kill_activation_midway(copied)
    refused = run_install(copied, released)
    assert not refused.success
    assert "release.activation_recovery_required" in " ".join(step_failures(refused).values())

    planned = cli("recover", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    assert json.loads(planned.output)["action"] == "would_recover"
    assert operations_of(copied).cache.pending() is not None

    done = cli("recover", "--json")
    assert done.exit_code == 0, done.output
    outcome = json.loads(done.output)
    assert (outcome["action"], outcome["receipt_kind"], outcome["release_id"]) == (
        "recovered_audit_only",
        "pointer_recovery",
        release_id,
    )
    ops = operations_of(copied)
    assert ops.cache.pending() is None and ops.cache.current().release_id == release_id
    assert [e.authorized_by for e in ops.cache.audit_log()] == ["activate", "pointer_recovery"]
    assert ops.cache.current().audit_sequence == 2

    again = run_install(copied, released)
    assert again.success, step_failures(again)
    assert materializations(again)["installed_release"]["action"] == "already_active"


def test_release_recover_job_restores_a_killed_activation(copied, released):
    release_id = kill_activation_midway(copied)
    job = copied.definitions().resolve_job_def("release_recover_job")
    result = job.execute_in_process(instance=copied.instance, raise_on_error=False)
    assert result.success, step_failures(result)
    outcome = result.output_for_node("release_recover")
    assert (outcome["action"], outcome["receipt_kind"]) == ("recovered_audit_only", "pointer_recovery")
    ops = operations_of(copied)
    assert ops.cache.pending() is None and ops.cache.current().release_id == release_id
    assert ops.cache.audit_log()[-1].authorized_by == "pointer_recovery"
    nothing = job.execute_in_process(instance=copied.instance, raise_on_error=False)
    assert nothing.output_for_node("release_recover")["action"] == "nothing_pending"


def test_gc_dry_run_lists_and_gc_removes_only_unreferenced_blobs(copied):
    ops = operations_of(copied)
    orphan = b"left by a publication that died before its commit\n"
    import hashlib

    orphan_key = blob_key(hashlib.sha256(orphan).hexdigest())
    ops.registry.store.put_if_absent(orphan_key, orphan)
    referenced = sorted(k for k in ops.registry.store.keys("blobs/") if k != orphan_key)

    listed = cli("gc", "--dry-run", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["removed"]["blobs"] == [orphan_key]
    assert ops.registry.store.exists(orphan_key)

    with ops.registry.leases.hold("publication"):
        blocked = cli("gc", "--json")
        assert blocked.exit_code == 1 and json.loads(blocked.output)["refused"] == "release.publication_in_progress"
        assert ops.registry.store.exists(orphan_key)

    job = copied.definitions().resolve_job_def("release_gc_job")
    result = job.execute_in_process(instance=copied.instance, raise_on_error=False)
    assert result.success, step_failures(result)
    assert result.output_for_node("release_gc")["removed"]["blobs"] == [orphan_key]
    assert sorted(ops.registry.store.keys("blobs/")) == referenced
    active = ops.cache.current().release_id
    assert ops.registry.fetch(active).release_id == active
    verified = cli("verify", str(ops.cache.load(active).path))
    assert verified.exit_code == 0 and "verified installed release" in verified.output


def test_rollback_and_repair_audit_commands_answer_with_their_codes(copied):
    rollback = cli("rollback", "--json")
    assert rollback.exit_code == 1 and json.loads(rollback.output)["refused"] == "release.no_previous_deployment"
    repair = cli("repair-audit", "--dry-run", "--json")
    assert repair.exit_code == 0 and json.loads(repair.output)["action"] == "audit_complete"


def _grant_stages(setup, clock, *, synthetic: bool):
    import dagster as dg

    from dpone_dagster.defs.release.assets import development_grant, development_policy

    settings = setup.settings.model_copy(update={"synthetic": synthetic})
    return dg.materialize(
        [development_policy, development_grant],
        resources={
            "authority_platform": dg.ResourceDefinition.hardcoded_resource(AuthorityPlatform(settings, clock=clock))
        },
        instance=setup.instance,
        raise_on_error=False,
    )


def test_grant_stage_shows_expiry_and_renews_an_expired_synthetic_grant_only_visibly(copied):
    from datetime import timedelta

    from dpone_dagster.authority.memory import FixedClock
    from dpone_dagster.clock import SystemClock
    from dpone_dagster.defs.release.synthetic_bootstrap import GRANT_VALIDITY

    later = FixedClock(SystemClock().now() + GRANT_VALIDITY + timedelta(hours=2))
    frozen = _grant_stages(copied, later, synthetic=False)  # a configured platform: shown expired, never renewed
    assert frozen.success, step_failures(frozen)
    grant = materializations(frozen)["development_grant"]
    assert (grant["expired"], grant["synthetic_renewal"], grant["sequence"]) == (True, "none", 1)
    assert grant["hours_until_expiry"] < 0

    renewed = _grant_stages(copied, later, synthetic=True)
    assert renewed.success, step_failures(renewed)
    grant = materializations(renewed)["development_grant"]
    assert grant["synthetic_renewal"].startswith("renewed: sequence 1 expired at ")
    assert (grant["expired"], grant["sequence"]) == (False, 2)
    logged = [r.user_message for r in copied.instance.all_logs(renewed.run_id) if r.level >= 30]
    assert any("grant sequence 1 expired at" in m and "renewed as sequence 2" in m for m in logged), logged


def test_rollback_job_activates_the_previous_deployment_under_a_rollback_receipt(copied):
    ops = operations_of(copied)
    release_id = ops.cache.current().release_id
    # a second activation (the only grant-covered release here is the installed one): the pointer's
    # previous deployment is then that release, which rollback must select and audit as `rollback`
    ops.cache.activate(release_id, receipt=ops._activation_receipt(ops.cache.load(release_id).bundle, "activate"))
    planned = cli("rollback", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    assert (json.loads(planned.output)["action"], json.loads(planned.output)["release_id"]) == (
        "would_roll_back",
        release_id,
    )
    assert len(operations_of(copied).cache.audit_log()) == 2
    result = (
        copied.definitions()
        .resolve_job_def("release_rollback_job")
        .execute_in_process(instance=copied.instance, raise_on_error=False)
    )
    assert result.success, step_failures(result)
    outcome = result.output_for_node("release_rollback")
    assert (outcome["action"], outcome["receipt_kind"], outcome["release_id"]) == (
        "rolled_back",
        "rollback",
        release_id,
    )
    last = operations_of(copied).cache.audit_log()[-1]
    assert (last.sequence, last.action, last.authorized_by, last.receipt_digest) == (
        3,
        "rollback",
        "rollback",
        outcome["receipt_digest"],
    )
