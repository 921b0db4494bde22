"""`run_release_job`: the summary `dpone demo` prints, and a refusal raised with its own code."""

from __future__ import annotations

import dagster as dg
import pytest

from dpone_dagster.contracts.base import parse_document
from dpone_dagster.defs.release.resources import AuthorityPlatform
from dpone_dagster.defs.release.run import ReleaseRunError, run_release_job, summarize
from dpone_dagster.release.platform.target import ProtectedTargetDocument
from tests.synthetic_project import TASKS


def test_a_refused_release_raises_the_refusal_code(fresh, env_of):
    setup = env_of(fresh)
    AuthorityPlatform(setup.settings).prepare()
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": 3}).canonical_bytes())
    with dg.instance_for_test() as instance, pytest.raises(ReleaseRunError) as raised:
        run_release_job(instance)
    assert raised.value.code == "authority.revoked"
    assert str(raised.value).startswith("[authority.revoked]")


def test_summary_of_a_successful_release(released):
    summary = summarize(released.run)
    assert summary.release_id.startswith("sha256:")
    assert summary.deployment_id == f"synthetic-dev:{summary.release_id.removeprefix('sha256:')}"
    assert summary.tasks == TASKS and summary.denied == {"admission.development_dormant": TASKS}
    assert summary.credential_resolutions == 0
    lines = summary.lines()
    assert lines[0] == f"installed release {summary.release_id} (SYNTHETIC authority)"
    assert f"{TASKS} of {TASKS} tasks denied" in lines[2] and "credential resolutions: 0" in lines[2]
