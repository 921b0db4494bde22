"""The synthetic campaign: the only source the executable synthetic-family release is ever composed from.

The platform ships it inside this package (`synthetic_source/flows/`: three workloads over the
generated `orders` table of the synthetic runtime's lake) and pins its snapshot digest here
(`SYNTHETIC_SOURCE_DIGEST`): that pin is the synthetic authority. `compose_synthetic_release(tree)`
refuses any other source (`runtime.synthetic_source_unpinned`), captures it with the same capture as
a development release (every SQL file through the delivered-SQL reader, every pack rebuilt and
compared), and assembles the `synthetic_composition_validation` parent over the exact bytes.
`install_synthetic_campaign(root)` does that from the shipped source and installs the result into
the embedded default's synthetic runtime (`SyntheticReleaseStore`).

What a reader could get wrong: nothing here reads a development release, its bundle, its source or
the adopter's project, so development SQL can never run as synthetic; the synthetic family is used
for synthetic data only (the design's non-goal). Editing the shipped source changes its digest:
`python -m devtools.pack_fixtures build-fixtures` prints the digest to pin, and until it is pinned
the synthetic runtime refuses to install it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from dpone_dagster.contracts.flows import ResourceCeiling
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import ORDINARY_CONSTITUENT_KIND, SyntheticCompositionV3
from dpone_dagster.release.build.bundle import PARENT_PATH, ordinary_path, sidecar_path
from dpone_dagster.release.build.flows import capture_ordinary
from dpone_dagster.release.runtime.synthetic_release import (
    CAMPAIGN_ID,
    SyntheticBundle,
    SyntheticReleaseError,
    SyntheticReleaseStore,
    open_synthetic_bundle,
)
from dpone_dagster.release.source.snapshot import SourceReader, open_source

SYNTHETIC_SOURCE_DIGEST = "sha256:5e665138aa4dd2fcd923ddaeb8382eb8cbd820d2adadbea1a71b31c98b35a04f"
"""Snapshot digest of the shipped `synthetic_source/` (domain `dpone.source-snapshot.v1`).

Never computed at run time.
"""

SYNTHETIC_CEILING = ResourceCeiling(max_cpu_millicores=1000, max_memory_bytes=1024**3)
"""The per-workload resource ceiling of the synthetic campaign."""


@contextmanager
def shipped_source() -> Iterator[Path]:
    """The directory of the synthetic source this package ships (as a real path while the context is open)."""
    with resources.as_file(resources.files(__package__).joinpath("synthetic_source")) as path:
        yield Path(path)


def compose_synthetic_release(tree: SourceReader, *, pinned_digest: str = SYNTHETIC_SOURCE_DIGEST) -> SyntheticBundle:
    """The synthetic-family release of the pinned synthetic source `tree` (see the module docstring)."""
    if tree.snapshot.digest != pinned_digest:
        raise SyntheticReleaseError(
            "runtime.synthetic_source_unpinned",
            "the synthetic release is composed only from the synthetic source the platform pinned",
        )
    capture = capture_ordinary(tree, resource_ceiling=SYNTHETIC_CEILING)
    members: dict[str, bytes] = {}
    for workload in capture.workloads:
        constituent_id = digest(ORDINARY_CONSTITUENT_KIND, workload)
        members[ordinary_path(constituent_id)] = workload.canonical_bytes()
        for file in workload.source_files:
            members[sidecar_path(constituent_id, file.path)] = tree.read_bytes(file.path)
    parent = SyntheticCompositionV3(
        purpose="synthetic_validation",
        trust_tier="non_production",
        data_class="synthetic",
        campaign_id=CAMPAIGN_ID,
        constituents=sorted(digest(ORDINARY_CONSTITUENT_KIND, workload) for workload in capture.workloads),
    )
    members[PARENT_PATH] = parent.canonical_bytes()
    return open_synthetic_bundle(members)


@dataclass(frozen=True)
class InstalledCampaign:
    release_id: str
    written: bool
    workloads: int


def install_synthetic_campaign(root: Path, *, work_dir: Path | None = None) -> InstalledCampaign:
    """Compose the shipped synthetic campaign and install it (idempotent) into the synthetic runtime at `root`."""
    with shipped_source() as path, open_source(path, work_dir=work_dir) as tree:
        bundle = compose_synthetic_release(tree)
    written = SyntheticReleaseStore(root).install(bundle)
    return InstalledCampaign(bundle.release_id, written, len(bundle.ordinary))
