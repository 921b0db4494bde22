"""The release half of `dpone demo`: the release group end to end, then an identical retry that writes nothing.

The release domain's definitions are built here for this test's state directory (`location_definitions`);
`dpone demo` itself hands over the code location it loaded by module name (`dpone_dagster.cli.location`).
"""

from __future__ import annotations

import dagster as dg

from dpone_dagster.cli.demo import run_release
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.defs.release.definitions import location_definitions


def test_demo_release_installs_once_and_an_identical_retry_writes_zero_bytes(_isolated_state):
    reset_store_cache()
    with dg.instance_for_test() as instance:
        location = location_definitions()
        first = run_release(instance, location)
        again = run_release(instance, location)

    assert first.summary.synthetic is True
    assert first.already_published is False and first.bytes_written > 0 and first.objects_written > 0
    assert first.activated is True
    assert again.summary.release_id == first.summary.release_id
    assert again.summary.deployment_id == first.summary.deployment_id
    assert again.summary.run_id != first.summary.run_id
    assert (again.already_published, again.bytes_written, again.objects_written, again.activated) == (True, 0, 0, False)
    for outcome in (first, again):
        assert outcome.summary.tasks > 0
        assert outcome.summary.denied == {"admission.development_dormant": outcome.summary.tasks}
        assert outcome.summary.credential_resolutions == 0

    lines = again.lines()
    assert lines[1] == f"installed release {first.summary.release_id} (SYNTHETIC authority)"
    assert "already published, 0 bytes written" in lines[2]
    assert f"{again.summary.tasks} of {again.summary.tasks} tasks denied" in lines[-1]
    assert lines[-1].endswith("credential resolutions: 0")
    assert f"published {first.bytes_written} bytes in {first.objects_written} objects" in first.lines()[2]
