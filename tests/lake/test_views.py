"""Both kinds of fork view satisfy `lake.resolution.views.View`, member by member.

No type checker runs in CI, so the Protocol is checked structurally here: every member View declares
exists on a real `DeferView` and a real `PartitionView`, a property with a value of the declared type,
a method with the same parameters whose result is the declared type.
"""

from __future__ import annotations

import inspect
import typing

import pytest

from dpone_dagster.lake.resolution import views
from dpone_dagster.lake.resolution.partitions import PartitionView
from dpone_dagster.lake.resolution.plan import DeferView, TableName
from dpone_dagster.lake.resolution.views import View

SOURCE = TableName("staging", "orders")


def _members(protocol: type) -> dict[str, object]:
    return {name: value for name, value in vars(protocol).items() if not name.startswith("_")}


def _hints(function) -> dict[str, object]:
    return typing.get_type_hints(function, globalns=vars(views))


def satisfies(instance: object, protocol: type) -> list[str]:
    """What `instance` lacks or gets wrong of `protocol` (empty when it satisfies it)."""
    problems = []
    for name, member in _members(protocol).items():
        if not hasattr(instance, name):
            problems.append(f"{name}: missing")
            continue
        if isinstance(member, property):
            expected = _hints(member.fget)["return"]
            value = getattr(instance, name)
            if not isinstance(value, expected):
                problems.append(f"{name}: {type(value).__name__}, not {expected.__name__}")
            continue
        method = getattr(instance, name)
        wanted = [p for p in inspect.signature(member).parameters if p != "self"]
        given = list(inspect.signature(method).parameters)
        if given != wanted:
            problems.append(f"{name}: parameters {given}, not {wanted}")
            continue
        result = method(*(["fork_alias"] * len(wanted)))
        expected = _hints(member)["return"]
        if not isinstance(result, expected):
            problems.append(f"{name}: returns {type(result).__name__}, not {expected.__name__}")
    return problems


def defer_view() -> DeferView:
    return DeferView(SOURCE, "prod", "ancestor_prod", SOURCE)


def partition_view() -> PartitionView:
    return PartitionView(
        name=SOURCE,
        owner_workspace="prod",
        owner_alias="ancestor_prod",
        source=SOURCE,
        own_alias="lake_main",
        column="day",
        keys=("2024-01-05",),
    )


@pytest.mark.parametrize("make", [defer_view, partition_view], ids=["DeferView", "PartitionView"])
def test_both_fork_views_satisfy_the_view_protocol(make):
    assert satisfies(make(), View) == []


def test_the_protocol_names_what_the_plan_and_the_applier_use():
    assert set(_members(View)) == {
        "name",
        "owner_workspace",
        "owner_alias",
        "source",
        "replace",
        "select_sql",
        "stored_sql",
        "create_sql",
    }


def test_the_structural_check_sees_a_missing_or_different_member():
    class NoStoredSql:
        name = SOURCE
        owner_workspace = "prod"
        owner_alias = "ancestor_prod"
        source = SOURCE
        replace = False

        def select_sql(self) -> str:
            return "SELECT 1"

        def create_sql(self, catalog: str) -> str:
            return "CREATE VIEW v AS SELECT 1"

    assert satisfies(NoStoredSql(), View) == [
        "stored_sql: missing",
        "create_sql: parameters ['catalog'], not ['alias']",
    ]
