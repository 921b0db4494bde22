"""The executable synthetic-family release: its layout, its one full verification, and where it is installed.

Layout (member path → bytes), every byte bound by the parent, whose profile-refined digest is the
release identity (domain `dpone.release-set.v3.synthetic_composition_validation`):

- `release.json`: a `SyntheticCompositionV3` parent (`purpose: synthetic_validation`, `data_class:
  synthetic`), `constituents` = the ordinary constituent ids;
- `ordinary/<hex>.json`: one captured ordinary workload, `<hex>` its constituent id;
- `sources/<hex>/<path>`: every file of that workload's `source_files` (path, SHA-256, size).

It is composed only from the platform's pinned synthetic campaign (`runtime.synthetic_campaign`),
never from a development release. `open_synthetic_bundle` is its one full verification;
`SyntheticReleaseStore` installs it (stage, reread, verify, rename, then the `current` pointer)
under the embedded default's synthetic runtime root and seeds the synthetic `orders` table its
flows read.

What a reader could get wrong: this is a closed family of its own. Its parent is refused by every
development reader (`open_bundle` says `release.not_development_family`) and by the production reader
(`dispatch.family_refused`), and its identity never equals a development release's. It carries no
authority: the standard runtime admits its tasks only on a target the platform declared synthetic,
and runs them in a sandboxed DuckDB (`runtime.sandbox`).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.dispatch import DispatchError, read_family_document
from dpone_dagster.contracts.flows import CapturedWorkload
from dpone_dagster.contracts.identity import digest
from dpone_dagster.contracts.release_documents import ORDINARY_CONSTITUENT_KIND, SyntheticCompositionV3
from dpone_dagster.release.build.bundle import PARENT_PATH, content_sha256, ordinary_path, sidecar_path
from dpone_dagster.release.runtime.admission import (
    SYNTHETIC_FAMILY,
    AdmissionView,
    RuntimeTask,
    TaskKind,
    sealed_view,
)

CAMPAIGN_ID = "embedded-runtime"
SEED_ROWS = 240
_SOURCE_DATABASE = "orders_source.duckdb"


class SyntheticReleaseError(CodedError):
    codes = {
        "runtime.synthetic_release_invalid": (
            "The synthetic-family release fails verification: a member is missing, "
            "altered, unbound, or the parent is not a synthetic-family document."
        ),
        "runtime.synthetic_release_missing": (
            "No synthetic-family release is installed (only the embedded default installs one)."
        ),
        "runtime.synthetic_source_unpinned": (
            "The synthetic release was asked to compose from a source other than "
            "the synthetic campaign the platform pinned (a development source, or "
            "an edited campaign)."
        ),
    }


@dataclass(frozen=True)
class SyntheticBundle:
    """A verified synthetic-family release: identity, parent, workloads and every member's bytes."""

    release_id: str
    parent: SyntheticCompositionV3
    ordinary: tuple[CapturedWorkload, ...]
    members: Mapping[str, bytes]
    verified_view: AdmissionView | None = field(default=None, compare=False, repr=False)
    """Sealed by `open_synthetic_bundle` after every byte verified; a bundle built by hand has none."""

    def constituent_of(self, pack_id: str) -> str:
        for workload in self.ordinary:
            if workload.pack_id == pack_id:
                return digest(ORDINARY_CONSTITUENT_KIND, workload)
        raise SyntheticReleaseError("runtime.synthetic_release_invalid", "no workload of this release has that pack id")

    def admission_view(self) -> AdmissionView:
        """The sealed view `open_synthetic_bundle` made; a hand-built bundle gets an unsealed one (denied)."""
        if self.verified_view is not None:
            return self.verified_view
        return AdmissionView(self.release_id, SYNTHETIC_FAMILY, None, 0, _tasks_of(self.ordinary))


def _tasks_of(ordinary: tuple[CapturedWorkload, ...]) -> frozenset[RuntimeTask]:
    tasks = set()
    for workload in ordinary:
        tasks.add(RuntimeTask(TaskKind.ORDINARY, workload.pack_id))
        tasks.update(
            RuntimeTask(TaskKind.PRE_HOOK, workload.pack_id, hook.hook_id, hook.publish_xcom) for hook in workload.hooks
        )
    return frozenset(tasks)


def open_synthetic_bundle(members: Mapping[str, bytes], *, expected_release_id: str | None = None) -> SyntheticBundle:
    """Verify every byte of `members` against the synthetic parent; raise on any drift or foreign family."""
    members = dict(members)
    data = members.get(PARENT_PATH)
    if data is None:
        raise SyntheticReleaseError("runtime.synthetic_release_invalid", "the release has no parent document")
    try:
        parent = read_family_document(data, SYNTHETIC_FAMILY)
    except (DispatchError, CanonicalError, CodedError) as error:
        raise SyntheticReleaseError(
            "runtime.synthetic_release_invalid", f"the parent is not a synthetic-family release ({error.code})"
        ) from None
    if not isinstance(parent, SyntheticCompositionV3):
        raise SyntheticReleaseError("runtime.synthetic_release_invalid", "the parent is not a synthetic composition")
    release_id = parent.document_digest()
    if expected_release_id is not None and release_id != expected_release_id:
        raise SyntheticReleaseError(
            "runtime.synthetic_release_invalid", "the parent does not have the expected release identity"
        )
    expected = {PARENT_PATH}
    workloads = []
    for constituent_id in parent.constituents:
        path = ordinary_path(constituent_id)
        expected.add(path)
        workload = _workload(members.get(path), constituent_id)
        for file in workload.source_files:
            source = sidecar_path(constituent_id, file.path)
            expected.add(source)
            blob = members.get(source)
            if blob is None or len(blob) != file.size or content_sha256(blob) != file.content_sha256:
                raise SyntheticReleaseError(
                    "runtime.synthetic_release_invalid", f"source file {file.path!r} is missing or altered"
                )
        workloads.append(workload)
    if set(members) - expected:
        raise SyntheticReleaseError(
            "runtime.synthetic_release_invalid", "the release holds members its parent does not bind"
        )
    ordinary = tuple(sorted(workloads, key=lambda w: w.pack_id))
    view = sealed_view(release_id, SYNTHETIC_FAMILY, None, 0, _tasks_of(ordinary))
    return SyntheticBundle(release_id, parent, ordinary, MappingProxyType(members), verified_view=view)


def _workload(data: bytes | None, constituent_id: str) -> CapturedWorkload:
    try:
        if data is None or digest(ORDINARY_CONSTITUENT_KIND, data) != constituent_id:
            raise SyntheticReleaseError(
                "runtime.synthetic_release_invalid", "an ordinary constituent is missing or altered"
            )
        return parse_document(CapturedWorkload, data)
    except (CanonicalError, CodedError) as error:
        if isinstance(error, SyntheticReleaseError):
            raise
        raise SyntheticReleaseError(
            "runtime.synthetic_release_invalid", f"an ordinary constituent is invalid ({error.code})"
        ) from None


@dataclass(frozen=True)
class SyntheticReleaseStore:
    """Installed synthetic-family releases under `root`: `releases/<hex>/`, a `current` pointer, and `lake/`."""

    root: Path

    @property
    def lake_dir(self) -> Path:
        return self.root / "lake"

    def install(self, bundle: SyntheticBundle) -> bool:
        """Install (if absent) and make current; seed the synthetic source. True when anything was written."""
        final = self.root / "releases" / bundle.release_id.removeprefix("sha256:")
        wrote = False
        if not final.is_dir():
            staging = self.root / "staging" / uuid.uuid4().hex
            try:
                for path, data in sorted(bundle.members.items()):
                    target = staging / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                _read_dir(staging, bundle.release_id)
                final.parent.mkdir(parents=True, exist_ok=True)
                staging.rename(final)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            wrote = True
        if self.current_id() != bundle.release_id:
            pointer = self.root / "current"
            staged = pointer.with_name("current.tmp")
            staged.write_text(json.dumps({"release_id": bundle.release_id}) + "\n", encoding="utf-8")
            staged.replace(pointer)
            wrote = True
        return seed_synthetic_source(self.lake_dir) or wrote

    def current_id(self) -> str | None:
        pointer = self.root / "current"
        if not pointer.is_file():
            return None
        try:
            value = json.loads(pointer.read_text(encoding="utf-8"))["release_id"]
        except (ValueError, KeyError, TypeError):
            raise SyntheticReleaseError(
                "runtime.synthetic_release_invalid", "the synthetic current pointer is unreadable"
            ) from None
        return str(value)

    def load_current(self) -> SyntheticBundle | None:
        """The current synthetic release, every byte re-verified; None when none was installed."""
        release_id = self.current_id()
        if release_id is None:
            return None
        return _read_dir(self.root / "releases" / release_id.removeprefix("sha256:"), release_id)


def _read_dir(path: Path, release_id: str) -> SyntheticBundle:
    if not path.is_dir():
        raise SyntheticReleaseError(
            "runtime.synthetic_release_missing", "the current synthetic release is not installed"
        )
    members = {item.relative_to(path).as_posix(): item.read_bytes() for item in path.rglob("*") if item.is_file()}
    return open_synthetic_bundle(members, expected_release_id=release_id)


def seed_synthetic_source(lake_dir: Path) -> bool:
    """Create the synthetic `orders` table the flows read (generated rows, no real data); True if created."""
    import duckdb

    lake_dir.mkdir(parents=True, exist_ok=True)
    database = lake_dir / _SOURCE_DATABASE
    if database.exists():
        return False
    staged = lake_dir / f".{_SOURCE_DATABASE}.{uuid.uuid4().hex}"
    with duckdb.connect(str(staged)) as conn:
        conn.execute(
            f"""
            create table orders as
            select i as order_id,
                   1 + (i % 17) as customer_id,
                   timestamp '2026-01-05 08:00:00' + to_hours(i * 7) as ordered_at,
                   ['placed', 'shipped', 'completed', 'returned'][1 + (i % 4)] as status,
                   1000 + (i * 37) % 9000 as amount_cents
            from range(1, {SEED_ROWS + 1}) as t(i)
            """
        )
    staged.replace(database)
    return True
