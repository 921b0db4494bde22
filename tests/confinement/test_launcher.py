"""Confined-ness is detected (marker AND kernel probe), reported once, required when configured; the
`dpone` entry and a process with threads already running end up wholly confined."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from dpone_dagster.config import ForksConfig, load_config
from dpone_dagster.confinement import launcher, status
from dpone_dagster.confinement.landlock import ConfinementUnavailableError
from dpone_dagster.confinement.status import (
    MARKER_ENV,
    ConfinementRequiredError,
    check_fork_process,
    create_probe,
    is_confined,
)
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.workspaces.service import Workspaces

from .harness import FORK, REPO_ROOT, build_forked_state, last_json_line, needs_landlock, run_for_fork


@pytest.fixture
def in_fork(_isolated_state, monkeypatch):
    reset_store_cache()
    Workspaces(load_config()).create_fork(FORK, "prod", owner="alice")
    monkeypatch.setenv("DPONE_WORKSPACE", FORK)
    monkeypatch.setattr(status, "_WARNED", set())
    return load_config()


def _requiring(config):
    return config.model_copy(update={"forks": ForksConfig(require_confinement=True)})


def test_a_forged_marker_is_not_confinement(in_fork, monkeypatch):
    create_probe(in_fork)
    monkeypatch.setenv(MARKER_ENV, FORK)
    assert not is_confined(in_fork)


def test_acting_for_a_fork_unconfined_warns_once_with_its_code(in_fork, caplog):
    with caplog.at_level(logging.WARNING, logger="dpone_dagster.confinement"):
        check_fork_process(in_fork)
        check_fork_process(in_fork)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("[confinement.unconfined]"), said


def test_acting_for_a_fork_unconfined_is_refused_when_confinement_is_required(in_fork):
    with pytest.raises(ConfinementRequiredError) as caught:
        check_fork_process(_requiring(in_fork))
    assert caught.value.code == "confinement.required"
    check_fork_process(_requiring(in_fork.model_copy(update={"workspace": "prod"})))  # prod is never refused


def _no_landlock(rules):
    raise ConfinementUnavailableError("this kernel offers no Landlock")


def test_without_landlock_the_launcher_warns_or_refuses(in_fork, monkeypatch, caplog):
    monkeypatch.setattr(launcher, "restrict_self", _no_landlock)
    with caplog.at_level(logging.WARNING, logger="dpone_dagster.confinement"):
        assert launcher.confine(in_fork, {}) is None
    assert [r.getMessage()[:25] for r in caplog.records] == ["[confinement.unavailable]"]
    with pytest.raises(ConfinementRequiredError):
        launcher.confine(_requiring(in_fork), {})


def test_the_launcher_refuses_a_fork_it_cannot_confine_when_required(in_fork, tmp_path):
    """A fork catalog made beside the parent's (before folders) + `forks.require_confinement: true`."""
    from dpone_dagster.confinement.policy import fork_policy

    stem = next(t for t in fork_policy(in_fork, {}).trees if t.parent.name == "lakes").name
    (in_fork.state_path / "lakes").mkdir(parents=True, exist_ok=True)
    (in_fork.state_path / "lakes" / f"{stem}.ducklake").write_bytes(b"")
    settings = tmp_path / "dpone.yaml"
    settings.write_text("forks:\n  require_confinement: true\n")
    env = {"DPONE_STATE_DIR": str(in_fork.state_path), "DPONE_WORKSPACE": FORK, "DPONE_CONFIG": str(settings)}
    done = subprocess.run(
        [sys.executable, "-m", "dpone_dagster.confinement.launcher", "--", "true"],
        env={**_plain_env(), **env},
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 2 and "[confinement.required]" in done.stderr, done.stderr


def _plain_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("DPONE_", "DAGSTER_HOME"))} | {
        "DPONE_PROJECT_ROOT": str(REPO_ROOT)
    }


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    return build_forked_state(tmp_path_factory.mktemp("launcher") / "state")


PROBE = """
import json, logging, os, sys
from dpone_dagster.config import load_config
from dpone_dagster.confinement.status import is_confined
from dpone_dagster.lake.resolution.seam import resolve
logging.basicConfig()
resolve(load_config().workspace, "main")
print(json.dumps({"confined": is_confined(load_config())}))
"""


@needs_landlock
def test_a_confined_process_knows_it_and_does_not_warn(forked):
    done = run_for_fork([sys.executable, "-c", PROBE], forked.env(), confined=True)
    assert last_json_line(done.stdout) == {"confined": True}
    assert "confinement.unconfined" not in done.stderr
    loose = run_for_fork([sys.executable, "-c", PROBE], forked.env(), confined=False)
    assert last_json_line(loose.stdout) == {"confined": False}
    assert "[confinement.unconfined]" in loose.stderr


ATTEMPT = """
import json, os, threading
def attempt():
    try:
        os.remove({prod_file!r})
        return "removed"
    except PermissionError as exc:
        return "Permission denied" if "Permission denied" in str(exc) else str(exc)
"""

THREAD_BEFORE = (
    ATTEMPT
    + """
import sys
from dpone_dagster.confinement.launcher import confine_this_process
from dpone_dagster.confinement.status import MARKER_ENV
first = MARKER_ENV not in os.environ
release = threading.Event()
out = {{}}
worker = threading.Thread(target=lambda: (release.wait(), out.setdefault("thread", attempt())))
worker.start()                  # a thread that runs before the confinement
confine_this_process()          # re-execs this command line when another thread runs
release.set(); worker.join()
print(json.dumps({{"reexecuted": not first, **out}}))
"""
)


@needs_landlock
def test_a_thread_started_before_confining_in_place_cannot_write_either(forked):
    script = THREAD_BEFORE.format(prod_file=str(forked.prod_file))
    done = subprocess.run(
        [sys.executable, "-c", script], env=forked.env(), capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert last_json_line(done.stdout) == {"reexecuted": True, "thread": "Permission denied"}, done.stderr[-2000:]
    assert forked.prod_file.exists()


CLI_ENTRY = (
    ATTEMPT
    + """
import sys
from dpone_dagster.cli import main
sys.argv = ["dpone", "fork", "list"]
try:
    main()
except SystemExit:
    pass
print(json.dumps({{"after_dpone": attempt()}}))
"""
)


@needs_landlock
def test_the_dpone_entry_confines_itself_in_a_fork(forked):
    script = CLI_ENTRY.format(prod_file=str(forked.prod_file))
    done = subprocess.run(
        [sys.executable, "-c", script], env=forked.env(), capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert last_json_line(done.stdout) == {"after_dpone": "Permission denied"}, done.stderr[-2000:]
    assert forked.prod_file.exists()


def test_the_launcher_runs_a_prod_command_unchanged(tmp_path):
    script = textwrap.dedent(f"""
        import json, os
        open({str(tmp_path / "anywhere.txt")!r}, 'w').write('x')
        print(json.dumps({{"marker": os.environ.get({MARKER_ENV!r})}}))
    """)
    env = {**_plain_env(), "DPONE_STATE_DIR": str(tmp_path / "state")}
    done = run_for_fork([sys.executable, "-c", script], env, confined=True)
    assert last_json_line(done.stdout) == {"marker": None}, done.stderr
    assert (tmp_path / "anywhere.txt").read_text() == "x"


def test_a_code_location_acting_for_an_unconfined_fork_is_refused_when_required(in_fork, tmp_path, monkeypatch):
    """`deployment_workspace()` is what a code location's load (job tags) and the ducklake resource ask."""
    from dpone_dagster.integration.binding import deployment_workspace

    settings = tmp_path / "dpone.yaml"
    settings.write_text("forks:\n  require_confinement: true\n")
    monkeypatch.setenv("DPONE_CONFIG", str(settings))
    with pytest.raises(ConfinementRequiredError):
        deployment_workspace()
    monkeypatch.setenv("DPONE_WORKSPACE", "prod")
    assert deployment_workspace() == "prod"
