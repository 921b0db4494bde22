"""Fixtures shared by the release tests.

- `target` / `release`: a fresh `SyntheticTarget` per test and the default *fabricated* release on
  it (`tests.release.fabricated`: no dbt, hand-written packs) for fast edge-case tests.
- `real_compile` (session): the real `dbt_project_synthetic` opened as a verified source copy and
  compiled by real dbt ONCE per test session (a dbt compile takes ~10 s), with dbt's own output
  recorded for replay (`tests.release.real_pipeline`). Tests must treat its `tree` as read-only: a
  test that needs to change files opens its own copy.
- `real_release`: the real pipeline after the compile (flow capture, grant, compose) on that
  session compile, under a fresh synthetic target.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from dpone_dagster.release.build.native import NativeCompilation
from dpone_dagster.release.source.snapshot import SourceTree, open_source
from tests.release.fabricated import SyntheticRelease, SyntheticTarget, synthetic_release
from tests.release.real_pipeline import SYNTHETIC_PROJECT, DbtOutput, RealRelease, compile_recorded, compose_real


@pytest.fixture
def target() -> SyntheticTarget:
    return SyntheticTarget()


@pytest.fixture
def release(target: SyntheticTarget) -> SyntheticRelease:
    return synthetic_release(target)


@dataclass(frozen=True)
class RealCompile:
    tree: SourceTree
    native: NativeCompilation
    dbt_output: dict[str, DbtOutput]


@pytest.fixture(scope="session")
def real_compile(tmp_path_factory) -> RealCompile:
    with open_source(SYNTHETIC_PROJECT, work_dir=tmp_path_factory.mktemp("real_source")) as tree:
        native, dbt_output = compile_recorded(tree)
        yield RealCompile(tree=tree, native=native, dbt_output=dbt_output)


@pytest.fixture
def real_release(real_compile: RealCompile, tmp_path) -> RealRelease:
    return compose_real(real_compile.tree, real_compile.native, tmp_path)
