"""Fork naming: golden vectors (persisted state depends on them) and the invariants as properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone_dagster.contracts.workspace_ids import is_valid_workspace_id
from dpone_dagster.lake.resolution.naming import (
    DataPathError,
    ancestor_alias,
    fork_data_path,
    fork_metadata_schema,
    fork_segment,
    fork_storage_prefix,
    is_fork_schema,
    is_fork_segment_of,
    lake_alias,
)

IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# NEVER edit these expected values: they name schemas, files and prefixes that already exist.
GOLDEN = [
    # (workspace, lake, metadata schema, ancestor alias, segment)
    ("wm-fork-a", "main", "wm_fork_wm_fork_a_main_f1b8117f", "__wm_dl_main_wm_fork_a_ed39c47a", "wm_fork_a_4c6aabab"),
    (
        "wm-fork-a/b",
        "main",
        "wm_fork_wm_fork_a_b_main_9e04ca6d",
        "__wm_dl_main_wm_fork_a_b_04c1bde7",
        "wm_fork_a_b_ef499825",
    ),
    ("a-b", "main", "wm_fork_a_b_main_36cc0407", "__wm_dl_main_a_b_27f4c0a9", "a_b_d44362d6"),
    ("a_b", "main", "wm_fork_a_b_main_37384ba7", "__wm_dl_main_a_b_ddb66842", "a_b_648fa9b3"),
    (
        "Feature/Orders-V2",
        "analytics",
        "wm_fork_feature_orders_v2_analytics_7c6e0ac2",
        "__wm_dl_analytics_feature_orders_v2_7e861990",
        "feature_orders_v2_e84baa73",
    ),
    (
        "wm-fork-" + "x" * 60,
        "a_very_long_lake_name_indeed",
        "wm_fork_wm_fork_xxxxxxxxxxxxxxxx_a_very_long_lake_2652d22c",
        "__wm_dl_a_very_long_lake_nam_wm_fork_xxxxxxxxxxxx_e7d2750a",
        "wm_fork_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx_12ed0ef3",
    ),
]


@pytest.mark.parametrize(("workspace", "lake", "schema", "alias", "segment"), GOLDEN)
def test_golden_vectors(workspace, lake, schema, alias, segment):
    assert fork_metadata_schema(workspace, lake) == schema
    assert ancestor_alias(lake, workspace) == alias
    assert fork_segment(workspace) == segment


# Incarnation names (forks created since incarnations exist). NEVER edit these either.
GOLDEN_INCARNATIONS = [
    # (workspace, lake, incarnation, metadata schema, segment)
    ("wm-fork-a", "main", "0123456789abcdef", "wm_fork_wm_fork_a_main_8a694515", "wm_fork_a_d11c8811"),
    (
        "Feature/Orders-V2",
        "analytics",
        "fedcba9876543210",
        "wm_fork_feature_orders_v2_analytics_dd0534fd",
        "feature_orders_v2_3057fe68",
    ),
]


@pytest.mark.parametrize(("workspace", "lake", "incarnation", "schema", "segment"), GOLDEN_INCARNATIONS)
def test_golden_incarnation_vectors(workspace, lake, incarnation, schema, segment):
    assert fork_metadata_schema(workspace, lake, incarnation) == schema
    assert fork_segment(workspace, incarnation) == segment
    assert fork_metadata_schema(workspace, lake, "") == fork_metadata_schema(workspace, lake)
    assert schema != fork_metadata_schema(workspace, lake) and is_fork_schema(schema)
    assert is_fork_segment_of(workspace, segment) and is_fork_segment_of(workspace, fork_segment(workspace))
    assert not is_fork_segment_of(workspace + "x", segment)
    assert fork_data_path(workspace, "s3://bucket/lakes/main/", incarnation) == (
        f"s3://bucket/__wm_forks/{segment}/lakes/main/"
    )


def test_golden_data_paths():
    assert fork_data_path("wm-fork-a", "s3://bucket/lakes/main/") == (
        "s3://bucket/__wm_forks/wm_fork_a_4c6aabab/lakes/main/"
    )
    assert fork_data_path("wm-fork-a", "/srv/lakes/storage/main/") == (
        "/srv/lakes/storage/__wm_forks/wm_fork_a_4c6aabab/main/"
    )
    assert fork_data_path("wm-fork-a", "/srv/lakes/storage/main") == (
        "/srv/lakes/storage/__wm_forks/wm_fork_a_4c6aabab/main/"
    )
    assert lake_alias("main") == "lake_main"


def test_mangling_collisions_stay_distinct():
    assert fork_metadata_schema("a-b", "main") != fork_metadata_schema("a_b", "main")
    assert fork_metadata_schema("x", "a_b") != fork_metadata_schema("x_a", "b")
    assert fork_segment("A") != fork_segment("a")


def test_nested_fork_id_never_lands_in_its_siblings_prefix():
    parent_path = "s3://bucket/lakes/main/"
    a = fork_storage_prefix("wm-fork-a", parent_path)
    ab = fork_storage_prefix("wm-fork-a/b", parent_path)
    assert not ab.startswith(a) and not a.startswith(ab)
    assert not fork_data_path("wm-fork-a/b", parent_path).startswith(a)


def test_roots_cannot_be_forked():
    with pytest.raises(DataPathError):
        fork_data_path("wm-fork-a", "/")
    with pytest.raises(DataPathError):
        fork_data_path("wm-fork-a", "s3:///no-bucket")
    with pytest.raises(DataPathError):
        fork_data_path("wm-fork-a", "s3://bucket")
    with pytest.raises(DataPathError):
        fork_data_path("wm-fork-a", "s3://bucket/")


workspace_ids = st.text(alphabet=st.sampled_from("abcXYZ019-_./"), min_size=1, max_size=90).filter(
    is_valid_workspace_id
)
lakes = st.from_regex(r"[a-z][a-z0-9_]{0,40}", fullmatch=True)
data_paths = st.one_of(
    st.from_regex(r"s3://[a-z][a-z0-9-]{2,20}(/[a-z0-9_]{1,10}){1,3}/?", fullmatch=True),
    st.from_regex(r"(/[a-z0-9_]{1,10}){1,4}/?", fullmatch=True),
)


@settings(max_examples=300, deadline=None)
@given(workspace_ids, lakes)
def test_outputs_are_bounded_valid_identifiers(workspace, lake):
    schema = fork_metadata_schema(workspace, lake)
    alias = ancestor_alias(lake, workspace)
    assert IDENTIFIER.match(schema) and len(schema) <= 63
    assert IDENTIFIER.match(alias) and len(alias) <= 63
    assert is_fork_schema(schema)
    segment = fork_segment(workspace)
    assert "/" not in segment and segment == segment.lower()


@settings(max_examples=300, deadline=None)
@given(workspace_ids, lakes, workspace_ids, lakes)
def test_names_are_injective(ws1, lake1, ws2, lake2):
    if (ws1, lake1) != (ws2, lake2):
        assert fork_metadata_schema(ws1, lake1) != fork_metadata_schema(ws2, lake2)
        assert ancestor_alias(lake1, ws1) != ancestor_alias(lake2, ws2)
    if ws1 != ws2:
        assert fork_segment(ws1) != fork_segment(ws2)


@settings(max_examples=300, deadline=None)
@given(workspace_ids, workspace_ids, data_paths)
def test_fork_prefixes_never_nest_and_never_sit_under_the_parent(ws1, ws2, data_path):
    parent = data_path if data_path.endswith("/") else data_path + "/"
    p1 = fork_storage_prefix(ws1, data_path)
    path1 = fork_data_path(ws1, data_path)
    assert path1.startswith(p1) and path1.endswith("/")
    assert not path1.startswith(parent) and not p1.startswith(parent)
    if ws1 != ws2:
        p2 = fork_storage_prefix(ws2, data_path)
        assert not p1.startswith(p2) and not p2.startswith(p1)


def test_is_fork_schema_rejects_lookalikes():
    assert not is_fork_schema("public")
    assert not is_fork_schema("wm_fork_")
    assert not is_fork_schema("wm_fork_x_main_ZZZZZZZZ")
    assert not is_fork_schema("wm_fork_" + "a" * 60 + "_0123abcd")
