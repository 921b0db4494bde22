"""The release stages' kinds say what each stage's asset is (the badge on its graph node), never a bare `dpone`."""

from __future__ import annotations

from dpone_dagster.defs.release import build_defs


def test_every_release_stage_has_a_kind_that_names_what_it_is():
    specs = [spec for spec in build_defs().resolve_all_asset_specs() if spec.group_name == "release"]
    assert len(specs) >= 7
    kinds = {spec.key.to_user_string(): spec.kinds for spec in specs}
    assert all(k and "dpone" not in k for k in kinds.values()), kinds
    assert kinds["native_workspace"] == {"dbt"}
    assert len({frozenset(k) for k in kinds.values()}) == len(kinds)  # no two stages share a badge
