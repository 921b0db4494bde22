"""`dpone demo` in a fork, end to end through the `dpone` console script: it confines itself, builds
every dbt model into the fork (dbt and its plugin inherit the confinement), leaves prod's files
byte-identical, and does not try to deliver a release (the release platform's files are read-only to
a fork's process)."""

from __future__ import annotations

from .harness import BIN, build_forked_state, needs_landlock, run_for_fork

pytestmark = needs_landlock


def test_dpone_demo_in_a_fork_builds_confined_and_skips_the_release(tmp_path):
    forked = build_forked_state(tmp_path / "state")
    before = forked.fingerprint()
    done = run_for_fork([str(BIN / "dpone"), "demo"], forked.env(), confined=False)  # it confines itself
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "materialized 10 dbt assets" in lines
    assert any(line.startswith("release: not delivered from a fork") for line in lines)
    assert "confinement.unconfined" not in done.stderr
    assert forked.fingerprint() == before
