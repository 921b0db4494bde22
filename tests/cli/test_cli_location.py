"""`dpone_dagster.cli.location`: a code location loaded by module name, and the lake assets a demo builds."""

from __future__ import annotations

import sys
import textwrap

import dagster as dg
import pytest

from dpone_dagster.cli.location import LocationUnloadableError, ducklake_keys, lake_assets, load_location

LAKE_ASSETS = """
import dagster as dg

@dg.multi_asset(
    specs=[dg.AssetSpec("orders", kinds={"dbt", "ducklake"}), dg.AssetSpec("customers", kinds={"ducklake"})]
)
def lake_tables():
    return None

@dg.asset(kinds={"ducklake"}, partitions_def=dg.DailyPartitionsDefinition(start_date="2024-01-01"))
def daily_orders():
    return None

@dg.asset(kinds={"dbt"}, group_name="release")
def native_workspace():
    return None
"""


@pytest.fixture
def location_package(tmp_path, monkeypatch):
    """A throwaway package `h2_locations` whose modules are written by each test."""
    package = tmp_path / "h2_locations"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield package
    for name in [m for m in sys.modules if m.startswith("h2_locations")]:
        del sys.modules[name]


def _module(package, name: str, body: str) -> str:
    (package / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return f"{package.name}.{name}"


def test_a_module_scope_definitions_object_is_the_location(location_package):
    module = _module(
        location_package,
        "eager",
        LAKE_ASSETS + "\ndefs = dg.Definitions(assets=[lake_tables, daily_orders, native_workspace])\n",
    )
    location = load_location(module)
    assert isinstance(location, dg.Definitions)
    assert [a.node_def.name for a in lake_assets(location)] == ["lake_tables"]
    assert [key.to_user_string() for key in ducklake_keys(location)] == ["customers", "daily_orders", "orders"]


def test_a_definitions_function_is_called_at_each_load(location_package):
    module = _module(
        location_package,
        "lazy",
        LAKE_ASSETS
        + (
            "\nCALLS = []\n\n@dg.definitions\ndef defs():\n    CALLS.append(1)\n    return "
            "dg.Definitions(assets=[lake_tables])\n"
        ),
    )
    first, second = load_location(module), load_location(module)
    assert first is not second and isinstance(first, dg.Definitions)
    assert len(sys.modules[module].CALLS) == 2


def test_a_module_without_exactly_one_location_is_refused_with_a_code(location_package):
    none = _module(location_package, "empty", "X = 1\n")
    two = _module(location_package, "two", "import dagster as dg\na = dg.Definitions()\nb = dg.Definitions()\n")
    for module, count in ((none, 0), (two, 2)):
        with pytest.raises(LocationUnloadableError) as refused:
            load_location(module)
        assert refused.value.code == "config.location_unloadable"
        assert f"it holds {count}" in refused.value.message


def test_a_missing_module_is_refused_but_a_location_missing_its_own_dependency_shows_that(location_package):
    with pytest.raises(LocationUnloadableError) as refused:
        load_location("h2_locations.absent")
    assert refused.value.code == "config.location_unloadable" and "'h2_locations.absent'" in refused.value.message
    broken = _module(location_package, "broken", "import h2_no_such_dependency\n")
    with pytest.raises(ModuleNotFoundError, match="h2_no_such_dependency"):
        load_location(broken)
