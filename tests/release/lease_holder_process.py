"""A child process that takes a registry lease and then blocks, so a test can kill it (-9) mid-operation.

    python -m tests.release.lease_holder_process <registry-dir> publish
        runs the real `ReleaseRegistry.publish` of the default fabricated release; its first blob
        write prints `holding <release_id>` and blocks forever (the killed publish of issue 20 #7).
    python -m tests.release.lease_holder_process <registry-dir> materialization <release_id>
        holds a `materialization` lease on `release_id` (what `ReleasePipeline.install` takes around
        fetch + materialize) and blocks (the killed install).

It prints one line when the lease is on disk; the test kills it there.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from dpone_dagster.release.delivery.object_stores import LocalDirectoryStore
from dpone_dagster.release.delivery.registry import BLOBS, ReleaseRegistry
from tests.release.fabricated import SyntheticTarget, synthetic_release


class BlockingStore(LocalDirectoryStore):
    """Blocks forever on the first blob write (after the publication lease is written)."""

    announce = ""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if key.startswith(BLOBS):
            print(f"holding {self.announce}", flush=True)
            while True:
                time.sleep(60)
        return super().put_if_absent(key, data)


def main(root: str, mode: str, *rest: str) -> None:
    target = SyntheticTarget()
    if mode == "publish":
        release = synthetic_release(target)
        store = BlockingStore(Path(root))
        store.announce = release.bundle.release_id
        receipt = target.publication(release.bundle, release.authority)
        ReleaseRegistry(store, clock=target.clock).publish(
            release.bundle, authority=release.authority, receipt=receipt, admission=target.issuer
        )
    elif mode == "materialization":
        registry = ReleaseRegistry(LocalDirectoryStore(Path(root)), clock=target.clock)
        with registry.leases.hold("materialization", subject=rest[0]):
            print(f"holding {rest[0]}", flush=True)
            while True:
                time.sleep(60)
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(*sys.argv[1:])
