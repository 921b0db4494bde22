"""Durable local file operations used by the release cache; one seam for fault-injection tests.

Every write the installer performs goes through a `LocalFiles` method, so a test can make the N-th
write fail and prove that no write point reports success. What a reader could get wrong:
`write_new` refuses to overwrite (it is for immutable files), `create_exclusive` is the atomic
create-if-absent that serializes activations (temporary file, fsync, `link(2)`), and `replace` is
the one atomic overwrite (temporary file, fsync, `rename(2)`), used only for the current pointer.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


class LocalFiles:
    """The real filesystem, with fsync at every durability point."""

    def make_dirs(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def write_new(self, path: Path, data: bytes) -> None:
        """Create `path` with `data`, durably; fail if it exists."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(path, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def replace(self, path: Path, data: bytes) -> None:
        """Atomically set `path` to `data` (readers see the old or the new bytes, never a mix)."""
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        self.write_new(temporary, data)
        os.replace(temporary, path)
        self.sync_dir(path.parent)

    def create_exclusive(self, path: Path, data: bytes) -> None:
        """Atomically create `path` with `data`: complete or absent, and `FileExistsError` if it exists."""
        temporary = path.with_name(f".{path.name}.new-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        self.write_new(temporary, data)
        try:
            os.link(temporary, path)
        finally:
            temporary.unlink()
        self.sync_dir(path.parent)

    def append(self, path: Path, data: bytes) -> None:
        with open(path, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())

    def truncate(self, path: Path, size: int) -> None:
        with open(path, "r+b") as handle:
            handle.truncate(size)
            handle.flush()
            os.fsync(handle.fileno())

    def rename_new(self, source: Path, target: Path) -> None:
        """Move directory `source` to `target`, which must not exist (atomic on one filesystem)."""
        if target.exists():
            raise FileExistsError(str(target.name))
        os.rename(source, target)
        self.sync_dir(target.parent)

    def remove(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        self.sync_dir(path.parent)

    def sync_dir(self, path: Path) -> None:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
