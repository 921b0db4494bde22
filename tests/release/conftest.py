"""Fixtures shared by the release tests: a synthetic target and one default synthetic release on it.

Each test gets a fresh `SyntheticTarget` (its live verifier can be changed or broken by the test)
and the default release composed under a grant verified by that same target.
"""

from __future__ import annotations

import pytest

from tests.release.fabricated import SyntheticRelease, SyntheticTarget, synthetic_release


@pytest.fixture
def target() -> SyntheticTarget:
    return SyntheticTarget()


@pytest.fixture
def release(target: SyntheticTarget) -> SyntheticRelease:
    return synthetic_release(target)
