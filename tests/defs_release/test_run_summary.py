"""`run_release_job`: the summary `dpone demo` prints, and a refusal raised with its own code."""

from __future__ import annotations

import dagster as dg
import pytest

from dpone_dagster.api_release import release_run_of, run_release_job
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.defs.release.definitions import location_definitions
from dpone_dagster.defs.release.resources import AuthorityPlatform
from dpone_dagster.release.platform.target import ProtectedTargetDocument
from dpone_dagster.release.run_summary import (
    CheckOutcome,
    ReleaseRun,
    ReleaseRunError,
    StepFailure,
    summarize_release_run,
)
from tests.synthetic_project import TASKS


def test_a_refused_release_raises_the_refusal_code(fresh, env_of):
    setup = env_of(fresh)
    AuthorityPlatform(setup.settings).prepare()
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": 3}).canonical_bytes())
    with dg.instance_for_test() as instance, pytest.raises(ReleaseRunError) as raised:
        run_release_job(location_definitions(), instance)
    assert raised.value.code == "authority.revoked"
    assert str(raised.value).startswith("[authority.revoked]")


def test_summary_of_a_successful_release(released):
    summary = summarize_release_run(release_run_of(released.run))
    assert summary.release_id.startswith("sha256:")
    assert summary.deployment_id == f"synthetic-dev:{summary.release_id.removeprefix('sha256:')}"
    assert summary.tasks == TASKS and summary.denied == {"admission.development_dormant": TASKS}
    assert summary.credential_resolutions == 0
    lines = summary.lines()
    assert lines[0] == f"installed release {summary.release_id} (SYNTHETIC authority)"
    assert f"{TASKS} of {TASKS} tasks denied" in lines[2] and "credential resolutions: 0" in lines[2]


INSTALLED = {
    "development_policy": {"synthetic": False},
    "installed_release": {"release_id": "sha256:" + "a" * 64, "deployment_id": "dev:" + "a" * 64},
}
DORMANT = CheckOutcome(
    True, None, {"tasks": 2, "denied: admission.development_dormant": 2, "credential_resolutions": 0}
)


def _refusal(run: ReleaseRun) -> ReleaseRunError:
    with pytest.raises(ReleaseRunError) as raised:
        summarize_release_run(run)
    return raised.value


def test_the_first_failed_check_names_the_refusal_before_any_failed_step():
    run = ReleaseRun(
        run_id="r1",
        succeeded=False,
        materialized={},
        checks={
            "policy_matches_pinned_digest": CheckOutcome(True, None, {}),
            "grant_verified": CheckOutcome(
                False, "[authority.expired] the grant expired", {"error_code": "authority.expired"}
            ),
        },
        step_failures=(StepFailure("published_release", "[release.x] later", "release.x"),),
    )
    refused = _refusal(run)
    assert (refused.code, refused.message) == ("authority.expired", "the grant expired")


def test_a_failed_step_names_the_refusal_when_no_check_failed():
    steps = (
        StepFailure("native_workspace", "[source.commit_mismatch] wrong commit", "source.commit_mismatch"),
        StepFailure("other", "second", "release.other"),
    )
    refused = _refusal(ReleaseRun("r2", False, {}, {}, steps))
    assert (refused.code, refused.message) == ("source.commit_mismatch", "wrong commit")
    uncoded = _refusal(ReleaseRun("r3", False, {}, {}, (StepFailure("native_workspace", None, None),)))
    assert (uncoded.code, uncoded.message) == ("release.run_failed", "step native_workspace failed")


def test_a_run_that_did_not_install_or_whose_dormancy_failed_is_refused():
    assert _refusal(ReleaseRun("r4", True, {}, {})).message == "the release run r4 did not complete"
    undormant = CheckOutcome(False, "a task was admitted", {"tasks": 2})
    assert _refusal(ReleaseRun("r5", True, INSTALLED, {})).message == "the dormancy check did not pass (run r5)"
    assert (
        _refusal(ReleaseRun("r6", True, INSTALLED, {"tasks_denied_before_credentials": undormant})).code
        == "release.run_failed"
    )
    summary = summarize_release_run(ReleaseRun("r7", True, INSTALLED, {"tasks_denied_before_credentials": DORMANT}))
    assert (summary.synthetic, summary.tasks, summary.denied) == (False, 2, {"admission.development_dormant": 2})
