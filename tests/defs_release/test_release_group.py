"""The release group end to end on the embedded default, and its refusals.

`released` is one real `release_job` run (sealed dbt compile, flow capture, composition, local
registry, local cache). Refusal tests start from a fresh state where only the synthetic authority
exists, alter one protected input, and check that the run stops at the right check with the right
stable code and that nothing downstream (registry, cache) was written.
"""

from __future__ import annotations

import json

import pytest

from dpone_dagster.authority.synthetic import sign_grant, synthetic_signers
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import DevelopmentGrant, GrantSignatures
from dpone_dagster.defs.release.resources import AuthorityPlatform
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.platform.target import GRANT_KEY, SIGNATURES_KEY, ProtectedTargetDocument
from tests.synthetic_project import NATIVE_MODELS, ORDINARY_FLOWS, PRE_HOOKS, TASKS

from .conftest import assert_no_private_values, check_results, materializations, step_failures

STAGES = {
    "development_policy",
    "development_grant",
    "native_workspace",
    "ordinary_flows",
    "development_release",
    "published_release",
    "installed_release",
}


def test_every_stage_materializes_and_all_checks_pass(released):
    found = materializations(released.run)
    assert set(found) == STAGES
    checks = check_results(released.run)
    assert {name: passed for name, (passed, _, _) in checks.items()} == {
        "policy_matches_pinned_digest": True,
        "grant_verified": True,
        "rollout_gate": True,
        "tasks_denied_before_credentials": True,
    }
    release_id = found["development_release"]["release_id"]
    assert found["published_release"]["release_id"] == release_id == found["installed_release"]["release_id"]
    assert found["native_workspace"]["native_workloads"] == NATIVE_MODELS
    assert found["ordinary_flows"]["ordinary_workloads"] == 3
    assert found["development_release"]["delivery_status"] == "delivered_dormant"
    assert [found[k]["action"] for k in ("development_release", "published_release", "installed_release")] == [
        "composed",
        "published",
        "activated",
    ]
    assert found["development_grant"]["expired"] is False and found["development_grant"]["hours_until_expiry"] > 0
    assert found["development_grant"]["synthetic_renewal"] == "none"
    assert found["published_release"]["already_published"] is False
    assert found["published_release"]["bytes_written"] > 0
    assert found["installed_release"]["activated"] is True
    assert found["development_policy"]["synthetic"] is True


def test_dormancy_check_denies_every_task_before_any_credential(released):
    passed, metadata, _ = check_results(released.run)["tasks_denied_before_credentials"]
    assert passed
    assert metadata["tasks"] == TASKS
    assert (metadata["native_tasks"], metadata["ordinary_tasks"], metadata["pre_hook_tasks"]) == (
        NATIVE_MODELS,
        ORDINARY_FLOWS,
        PRE_HOOKS,
    )
    assert metadata["denied: admission.development_dormant"] == TASKS
    assert metadata["credential_resolutions"] == 0
    assert metadata["runtime_port_uses"] == 0
    assert metadata["state"] == "Denied"


def test_published_release_is_in_the_registry_and_active_in_the_cache(released):
    settings = released.settings
    release_id = materializations(released.run)["published_release"]["release_id"]
    registry = LocalDirectoryStore(settings.registry_location)
    assert f"releases/{release_id.removeprefix('sha256:')}.json" in set(registry.keys("releases/"))
    pointer = json.loads((settings.cache_root / "synthetic-dev" / "current").read_bytes())
    assert pointer["release_id"] == release_id


def test_metadata_carries_no_secret_and_no_private_path(released):
    values = [value for meta in materializations(released.run).values() for key, value in meta.items() if key != "path"]
    values += [value for _, meta, _ in check_results(released.run).values() for value in meta.values()]
    assert_no_private_values(values, private=[str(released.state_dir)])


def test_identical_retry_of_publish_and_install_writes_nothing(released):
    job = released.definitions().resolve_job_def("release_job")
    keys = [
        k
        for k in job.asset_layer.selected_asset_keys
        if k.to_user_string() in {"published_release", "installed_release"}
    ]
    result = job.execute_in_process(instance=released.instance, asset_selection=keys, raise_on_error=False)
    assert result.success, step_failures(result)
    found = materializations(result)
    assert found["published_release"]["already_published"] is True
    assert found["published_release"]["bytes_written"] == 0
    assert found["installed_release"]["activated"] is False
    assert (found["published_release"]["action"], found["installed_release"]["action"]) == (
        "already_published",
        "already_active",
    )
    assert found["installed_release"]["release_id"] == materializations(released.run)["installed_release"]["release_id"]


# -- refusals -------------------------------------------------------------------------------


def _prepared(setup, env_of):
    """The synthetic authority written once, then frozen: the run sees a configured platform."""
    env_of(setup)
    AuthorityPlatform(setup.settings).prepare()
    setup.configured_platform = True
    return setup


def _assert_stopped_at(result, check: str, code: str, setup) -> None:
    assert not result.success
    passed, metadata, description = check_results(result)[check]
    assert not passed
    assert metadata["error_code"] == code
    assert description.startswith(f"[{code}]")
    assert set(materializations(result)) <= {"development_policy", "development_grant"}
    assert not list(LocalDirectoryStore(setup.settings.registry_location).keys())
    assert not (setup.settings.cache_root).exists()


def test_policy_not_matching_the_pinned_digest_stops_the_run(fresh, env_of):
    setup = _prepared(fresh, env_of)
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"policy_digest": "sha256:" + "ab" * 32}).canonical_bytes())
    result = setup.run_release()
    _assert_stopped_at(result, "policy_matches_pinned_digest", "authority.policy_digest_mismatch", setup)
    assert set(materializations(result)) == {"development_policy"}


def test_grant_below_threshold_stops_the_run(fresh, env_of):
    setup = _prepared(fresh, env_of)
    path = setup.authority_dir / SIGNATURES_KEY
    signatures = parse_document(GrantSignatures, path.read_bytes())
    path.write_bytes(signatures.model_copy(update={"signatures": signatures.signatures[:1]}).canonical_bytes())
    _assert_stopped_at(setup.run_release(), "grant_verified", "authority.threshold_not_met", setup)


def test_tampered_grant_stops_the_run(fresh, env_of):
    setup = _prepared(fresh, env_of)
    path = setup.authority_dir / GRANT_KEY
    grant = parse_document(DevelopmentGrant, path.read_bytes())
    path.write_bytes(grant.model_copy(update={"max_source_bytes": grant.max_source_bytes + 1}).canonical_bytes())
    _assert_stopped_at(setup.run_release(), "grant_verified", "authority.signature_invalid", setup)


def test_revoked_grant_stops_the_run(fresh, env_of):
    setup = _prepared(fresh, env_of)
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": 1}).canonical_bytes())
    _assert_stopped_at(setup.run_release(), "grant_verified", "authority.revoked", setup)


def test_resigned_grant_with_foreign_signers_is_refused(fresh, env_of):
    setup = _prepared(fresh, env_of)
    base = setup.authority_dir
    grant_bytes = (base / GRANT_KEY).read_bytes()
    forged = sign_grant(grant_bytes, synthetic_signers(2, prefix="someone-else"))
    (base / SIGNATURES_KEY).write_bytes(forged.canonical_bytes())
    _assert_stopped_at(setup.run_release(), "grant_verified", "authority.unknown_signer", setup)


@pytest.mark.parametrize("missing", [GRANT_KEY, SIGNATURES_KEY])
def test_missing_authority_document_fails_the_grant_stage_with_its_code(fresh, env_of, missing):
    setup = _prepared(fresh, env_of)
    (setup.authority_dir / missing).unlink()
    result = setup.run_release()
    assert not result.success
    failures = step_failures(result)
    assert "release.authority_documents_missing" in failures["development_grant"]
