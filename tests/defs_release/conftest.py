"""A release group materialized once per module on the embedded default, and helpers to read runs.

The native compile takes a while, so tests that only read share one completed `release_job` run
(`released`, session-scoped). Each setup is its own state directory and Dagster instance; tests that damage
something (tamper with the cache, revoke) work on a copy (`copied_release`).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from dpone_dagster.config import load_config
from dpone_dagster.control.store import reset_store_cache
from dpone_dagster.defs.release.definitions import build_definitions
from dpone_dagster.release.platform.settings import ReleaseSettings, release_settings

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class ReleaseSetup:
    state_dir: Path
    instance: dg.DagsterInstance
    run: dg.ExecuteInProcessResult | None = None
    configured_platform: bool = False

    @property
    def env(self) -> dict[str, str]:
        return {"DPONE_PROJECT_ROOT": str(REPO_ROOT), "DPONE_STATE_DIR": str(self.state_dir)}

    @property
    def settings(self) -> ReleaseSettings:
        """The embedded default; with `configured_platform`, the same locations but nothing synthetic
        is ever created or renewed (what a configured platform looks like)."""
        settings = release_settings(load_config(self.env))
        return settings.model_copy(update={"synthetic": False}) if self.configured_platform else settings

    @property
    def authority_dir(self) -> Path:
        return Path(self.settings.authority_location)

    def definitions(self) -> dg.Definitions:
        return build_definitions(self.settings)

    def run_release(self) -> dg.ExecuteInProcessResult:
        job = self.definitions().resolve_job_def("release_job")
        return job.execute_in_process(instance=self.instance, raise_on_error=False)


def materializations(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    return {
        event.asset_key.to_user_string(): {k: v.value for k, v in event.materialization.metadata.items()}
        for event in result.get_asset_materialization_events()
    }


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, tuple[bool, dict, str | None]]:
    out = {}
    for event in result.get_asset_check_evaluations():
        out[event.check_name] = (event.passed, {k: v.value for k, v in event.metadata.items()}, event.description)
    return out


def step_failures(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    return {
        event.step_key: event.event_specific_data.error.message
        for event in result.all_events
        if event.event_type_value == "STEP_FAILURE"
    }


@pytest.fixture
def env_of(monkeypatch):
    def apply(setup: ReleaseSetup) -> ReleaseSetup:
        for key, value in setup.env.items():
            monkeypatch.setenv(key, value)
        reset_store_cache()
        return setup

    return apply


def _new_setup(base: Path) -> ReleaseSetup:
    state = base / "state"
    state.mkdir(parents=True, exist_ok=True)
    home = base / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    return ReleaseSetup(state_dir=state, instance=dg.DagsterInstance.local_temp(str(home)))


@pytest.fixture(scope="session")
def released(tmp_path_factory) -> Iterator[ReleaseSetup]:
    """One successful `release_job` run on the embedded default, shared by the whole session."""
    setup = _new_setup(tmp_path_factory.mktemp("released"))
    with pytest.MonkeyPatch.context() as patch:
        for key, value in setup.env.items():
            patch.setenv(key, value)
        patch.delenv("DPONE_WORKSPACE", raising=False)
        reset_store_cache()
        setup.run = setup.run_release()
    assert setup.run.success, step_failures(setup.run)
    yield setup
    setup.instance.dispose()


@pytest.fixture
def copied_release(released: ReleaseSetup, tmp_path: Path) -> ReleaseSetup:
    """A private copy of the released state (same instance is not shared: a fresh one)."""
    setup = _new_setup(tmp_path)
    shutil.rmtree(setup.state_dir)
    shutil.copytree(released.state_dir, setup.state_dir)
    return setup


@pytest.fixture
def fresh(tmp_path: Path) -> ReleaseSetup:
    return _new_setup(tmp_path)


def assert_no_private_values(values, *, private: list[str]) -> None:
    """No value names a private path, and none looks like key material or a credential."""
    import re

    for value in values:
        text = str(value)
        for secret in private:
            assert secret not in text, f"private path in metadata: {text[:80]}"
        assert not re.search(r"(?i)(password|secret|private[_ ]key|BEGIN [A-Z ]*KEY)", text), text[:80]
