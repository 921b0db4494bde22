"""Fixtures for authority tests: a fresh synthetic 2-of-3 authority per test."""

from __future__ import annotations

import pytest

from dpone_dagster.authority.synthetic import SyntheticAuthority


@pytest.fixture
def authority() -> SyntheticAuthority:
    return SyntheticAuthority()
