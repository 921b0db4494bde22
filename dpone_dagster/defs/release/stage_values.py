"""Release stage values: held in memory for one run, never written; a published release is re-read.

What a reader could get wrong: nothing a release stage hands to the next one is written to
DAGSTER_HOME. Dagster's default IO manager would pickle the composed release and its source there
(and unpickling a file is running code); this IO manager keeps each value in the memory of the run
that produced it, which is why every release stage asks for in-process execution
(`dpone/in_process`, see `integration/binding.py`). It adds no metadata (no `path`).

A later run that materializes a stage without its upstream stages (a retry of publish and install,
`installed_release` or the rollout gate alone) gets `development_release` / `published_release`
back from the release registry by the release id their latest materialization recorded: every byte
is verified against that id (`ReleaseRegistry.fetch`), and the source the grant is verified against
is reconstructed from the verified release (`reconstructed_from`, as the release operations do).
A composed release that was never published, and the compile and capture stages, have no such
record: the stage that needs them refuses with `release.stage_value_unavailable`; launch it
together with its upstream stages (the whole group, or `release_job`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from dpone_dagster.authority.verification import ReconstructedSource
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.defs.release.refusals import refusals_as_failures
from dpone_dagster.release.delivery.operations import reconstructed_from
from dpone_dagster.release.errors import RegistryError

IO_MANAGER_KEY = "release_stage_values"
REGISTERED_STAGES = frozenset({"development_release", "published_release"})
"""Stages whose value is a `StagedRelease` another run can re-read from the registry by release id."""


@dataclass(frozen=True)
class StagedRelease:
    """A composed release: its identity, its exact member bytes, and the source it was built from."""

    release_id: str
    members: Mapping[str, bytes]
    source: ReconstructedSource


class StageValueError(CodedError):
    codes = {
        "release.stage_value_unavailable": "A release stage's input is held only in the memory of the run that "
        "produced it (nothing is pickled into DAGSTER_HOME) and cannot be re-read from the registry; launch the "
        "stage together with its upstream stages (the whole `release` group, or release_job).",
    }


class ReleaseStageValues(dg.IOManager):
    """One run's stage values, in memory; cross-run loads of a published release come from the registry."""

    def __init__(self, registry_resource, source_resource) -> None:
        self._values: dict[tuple[str, ...], object] = {}
        self._registry_resource = registry_resource
        self._source_resource = source_resource

    def handle_output(self, context: dg.OutputContext, obj: object) -> None:
        self._values[tuple(context.asset_key.path)] = obj

    def load_input(self, context: dg.InputContext) -> object:
        key = tuple(context.asset_key.path)
        if key in self._values:
            return self._values[key]
        with refusals_as_failures():
            return self._reread(context, context.asset_key)

    def _reread(self, context: dg.InputContext, asset_key: dg.AssetKey) -> StagedRelease:
        stage = asset_key.to_user_string()
        release_id = _recorded_release_id(context.instance, asset_key) if stage in REGISTERED_STAGES else None
        if release_id is None:
            raise StageValueError(
                "release.stage_value_unavailable",
                f"{stage} was not materialized in this run and no published release records its value; "
                f"launch this stage together with {stage} (the whole release group, or release_job)",
            )
        try:
            bundle = self._registry_resource.registry().fetch(release_id)
        except RegistryError as error:
            if error.code != "release.not_found":
                raise
            raise StageValueError(
                "release.stage_value_unavailable",
                f"{stage} recorded release {release_id}, which this registry does not hold (composed but never "
                f"published here); launch this stage together with {stage} (the whole release group, or release_job)",
            ) from None
        context.log.info(f"{stage}: release {release_id} re-read from the registry and verified")
        source = reconstructed_from(bundle, self._source_resource.identity().repository)
        return StagedRelease(release_id=release_id, members=dict(bundle.members), source=source)


def _recorded_release_id(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> str | None:
    event = instance.get_latest_materialization_event(asset_key)
    materialization = event.asset_materialization if event is not None else None
    value = materialization.metadata.get("release_id") if materialization is not None else None
    return value.value if value is not None and isinstance(value.value, str) else None


def release_stage_values() -> dg.IOManagerDefinition:
    """The IO manager definition (no run configuration; needs the registry and source resources)."""
    return dg.IOManagerDefinition(
        resource_fn=lambda init: ReleaseStageValues(init.resources.release_registry, init.resources.release_source),
        config_schema={},
        required_resource_keys={"release_registry", "release_source"},
        description="Release stage values held in memory for one run (nothing written to DAGSTER_HOME); "
        "a published release is re-read from the registry and verified",
    )
