"""Remove the private temp folders the confined forks of this session got (they outlive their state dirs)."""

from __future__ import annotations

import shutil

import pytest

from .harness import TEMP_DIRS


@pytest.fixture(scope="session", autouse=True)
def _remove_fork_temp_dirs():
    yield
    for path in TEMP_DIRS:
        shutil.rmtree(path, ignore_errors=True)
