"""This location's dbt translator: dbt_project_synthetic's nodes in the `synthetic_dbt` group.

What a reader could get wrong: everything fork-aware about the keys, kinds and tags is
`dpone_dagster.integration.dbt.translator.ForkAwareDbtTranslator`; this subclass only fixes the group.
"""

from __future__ import annotations

from dpone_dagster.config import DEFAULT_LAKE
from dpone_dagster.integration.dbt.translator import ForkAwareDbtTranslator

GROUP_NAME = "synthetic_dbt"


class SyntheticDbtTranslator(ForkAwareDbtTranslator):
    """dbt_project_synthetic's translator: every node in the `synthetic_dbt` group."""

    def __init__(self, lake: str = DEFAULT_LAKE, workspace: str | None = None) -> None:
        super().__init__(lake, workspace, group_name=GROUP_NAME)
