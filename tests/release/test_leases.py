"""Registry leases an operator can break (issue 20 #7): a killed publish or install, gc, break-lease.

The killed holders are real child processes (`tests.release.lease_holder_process`) killed with
SIGKILL while they hold their lease: a publication blocked inside `ReleaseRegistry.publish` after its
lease is written, and a materialization lease as `ReleasePipeline.install` takes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.contracts.bounds import format_timestamp
from dpone_dagster.contracts.registry_leases import RegistryLeaseV2
from dpone_dagster.contracts.release_records import RegistryLease
from dpone_dagster.release.delivery.lease_holders import holder_status, this_process
from dpone_dagster.release.delivery.leases import LEASES, LeaseError, Leases
from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import ReleaseRegistry
from tests.release.test_operations import operations


class Holder:
    """A child process holding a lease in `root/registry`; `kill()` is SIGKILL plus reaping."""

    def __init__(self, root: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.release.lease_holder_process", str(root / "registry"), *args],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline().split()
        assert line[:1] == ["holding"], "the child did not reach its lease"
        self.subject = line[1]

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=60)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill()
        self.process.stdout.close()


@pytest.fixture
def holders():
    started: list[Holder] = []
    yield lambda root, *args: started.append(Holder(root, *args)) or started[-1]
    for holder in started:
        holder.stop()


def registry_at(root: Path, clock) -> ReleaseRegistry:
    return ReleaseRegistry(LocalDirectoryStore(root / "registry"), clock=clock)


def refused(call) -> LeaseError:
    with pytest.raises(LeaseError) as raised:
        call()
    return raised.value


def test_a_killed_publish_leaves_a_lease_gc_names_and_break_lease_removes(tmp_path, target, release, holders):
    child = holders(tmp_path, "publish")
    ops = operations(target, release, tmp_path)
    (held,) = ops.registry.leases.all()
    assert (held.holder, held.process.pid, held.lease.subject) == ("publication", child.process.pid, child.subject)
    assert refused(lambda: ops.gc()).code == "release.publication_in_progress"  # holder alive: a real publication
    assert refused(lambda: ops.break_lease(held.lease_id, dry_run=False)).code == "release.lease_holder_alive"

    child.kill()
    for call in (lambda: ops.gc(), lambda: ops.gc(dry_run=True)):
        abandoned = refused(call)
        assert abandoned.code == "release.lease_abandoned"
        assert f"dpone release break-lease {held.lease_id}" in abandoned.message
    planned = ops.break_lease(held.lease_id)  # a dry run by default
    assert (planned.action, planned.dry_run, planned.removed["leases"]) == ("would_break", True, [held.lease_id])
    assert [h.lease_id for h in ops.registry.leases.all()] == [held.lease_id]
    assert ops.break_lease(held.lease_id, dry_run=False).action == "broken"
    assert ops.registry.leases.all() == []
    assert ops.gc().action in ("removed", "nothing_to_remove")


def test_a_successful_retry_of_the_killed_publish_releases_its_lease(tmp_path, target, release, holders):
    child = holders(tmp_path, "publish")
    assert child.subject == release.bundle.release_id  # the retry publishes the very same release
    child.kill()
    registry = registry_at(tmp_path, target.clock)
    registry.publish(
        release.bundle,
        authority=release.authority,
        receipt=target.publication(release.bundle, release.authority),
        admission=target.issuer,
    )
    assert registry.leases.all() == []
    assert operations(target, release, tmp_path, registry=registry).gc().action in ("removed", "nothing_to_remove")


def test_a_killed_install_is_released_by_its_retry_and_only_its_own(tmp_path, target, holders):
    mine, other = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    holders(tmp_path, "materialization", mine).kill()
    holders(tmp_path, "materialization", other).kill()
    leases = registry_at(tmp_path, target.clock).leases
    assert refused(lambda: leases.require_no_conflict("cleanup")).code == "release.lease_abandoned"
    with leases.hold("materialization", subject=mine):
        pass
    assert [h.lease.subject for h in leases.all()] == [other]  # another release's killed install stays for the operator


def test_a_failed_retry_releases_nothing(tmp_path, target, holders):
    subject = "sha256:" + "c" * 64
    holders(tmp_path, "materialization", subject).kill()
    leases = registry_at(tmp_path, target.clock).leases
    with pytest.raises(RuntimeError), leases.hold("materialization", subject=subject):
        raise RuntimeError("the retry failed too")
    assert [h.lease.subject for h in leases.all()] == [subject]


def write_lease(leases: Leases, lease) -> str:
    leases.store.put_if_absent(f"{LEASES}{lease.lease_id}.json", lease.canonical_bytes())
    return lease.lease_id


def foreign_lease(clock, **process) -> RegistryLeaseV2:
    now = clock.now()
    return RegistryLeaseV2(
        holder="publication",
        lease_id="publication-" + "f" * 32,
        acquired_at=format_timestamp(now),
        expires_at=format_timestamp(now + timedelta(hours=1)),
        subject=None,
        process=this_process().model_copy(update=process),
    )


def test_a_holder_on_another_host_is_broken_only_forced_after_its_ttl(tmp_path, target):
    leases = registry_at(tmp_path, target.clock).leases
    lease_id = write_lease(leases, foreign_lease(target.clock, host="elsewhere"))
    assert refused(lambda: leases.require_no_conflict("cleanup")).code == "release.publication_in_progress"
    assert refused(lambda: leases.break_lease(lease_id, dry_run=False)).code == "release.lease_holder_unverifiable"
    assert (
        refused(lambda: leases.break_lease(lease_id, dry_run=False, force=True)).code
        == "release.lease_holder_unverifiable"
    )
    later = Leases(leases.store, FixedClock(target.clock.now() + timedelta(hours=2)))
    assert later.break_lease(lease_id, dry_run=True, force=True).broken is False
    result = later.break_lease(lease_id, dry_run=False, force=True)
    assert (result.broken, result.forced, result.holder_status) == (True, True, "unverifiable")
    assert later.all() == []


def test_a_reused_pid_or_a_reboot_proves_the_holder_gone(tmp_path, target):
    me = this_process()
    assert holder_status(me) == "alive"
    assert holder_status(me.model_copy(update={"start_ticks": me.start_ticks + 1})) == "gone"  # pid reused
    assert holder_status(me.model_copy(update={"boot_id": "another-boot"})) == "gone"
    assert holder_status(me.model_copy(update={"pid_namespace": "pid-1"})) == "unverifiable"
    assert holder_status(None) == "unverifiable"


def test_a_version_1_lease_is_still_read_and_never_broken_unforced(tmp_path, target):
    leases = registry_at(tmp_path, target.clock).leases
    now = target.clock.now()
    old = RegistryLease(
        holder="materialization",
        lease_id="materialization-" + "0" * 32,
        acquired_at=format_timestamp(now),
        expires_at=format_timestamp(now + timedelta(minutes=5)),
    )
    lease_id = write_lease(leases, old)
    assert refused(lambda: leases.require_no_conflict("cleanup")).code == "release.publication_in_progress"
    assert refused(lambda: leases.break_lease(lease_id)).code == "release.lease_holder_unverifiable"
    assert refused(lambda: leases.break_lease("no-such-lease")).code == "release.lease_not_found"


def test_the_cli_breaks_a_lease_through_the_operations(tmp_path, target, release, holders, monkeypatch):
    from dpone_dagster.cli import app
    from dpone_dagster.cli import release as release_cli

    holders(tmp_path, "materialization", release.bundle.release_id).kill()
    ops = operations(target, release, tmp_path)
    monkeypatch.setattr(release_cli, "_operations", lambda: ops)
    (held,) = ops.registry.leases.all()
    runner = CliRunner()
    dry = runner.invoke(app, ["release", "break-lease", held.lease_id, "--dry-run"])
    assert dry.exit_code == 0 and "would_break" in dry.output and ops.registry.leases.all()
    done = runner.invoke(app, ["release", "break-lease", held.lease_id])
    assert done.exit_code == 0 and "broken" in done.output and ops.registry.leases.all() == []
    missing = runner.invoke(app, ["release", "break-lease", held.lease_id])
    assert missing.exit_code == 1 and "release.lease_not_found" in missing.output
