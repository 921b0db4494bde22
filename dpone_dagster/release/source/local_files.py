"""Durable local file operations used by the release cache; one seam for fault-injection tests.

Every write the installer performs goes through a `LocalFiles` method, so a test can make the N-th
write fail and prove that no write point reports success. What a reader could get wrong:
`write_new` refuses to overwrite (it is for immutable files), `create_exclusive` is the atomic
create-if-absent that serializes activations (temporary file, fsync, `link(2)`), and `replace` is
the one atomic overwrite (temporary file, fsync, `rename(2)`), used only for the current pointer.
`write_unsynced` is `write_new` without the fsync: it is for a staging folder whose files become
durable together, by one `sync_tree` before the folder is renamed into place (a crash before that
leaves only staging, which nothing reads). One fsync per file costs a journal commit each: at the
design's 10,000 workloads (~50,000 files) those commits, not the CPU, set the install time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from pathlib import Path


def _load_syncfs():
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    except OSError:
        return None


_SYNCFS = _load_syncfs()


def fsync_path(path: Path | str) -> None:
    """fsync one file or folder by its path."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def sync_filesystem(path: Path) -> bool:
    """Flush every written file and directory entry of the filesystem holding `path` to disk, with one
    `syncfs(2)`; False (nothing done) where the system has no `syncfs` (then fsync file by file)."""
    if _SYNCFS is None:
        return False
    descriptor = os.open(path, os.O_RDONLY)
    try:
        if _SYNCFS(descriptor) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(descriptor)
    return True


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

    def write_unsynced(self, path: Path, data: bytes) -> None:
        """Create `path` with `data`; fail if it exists. Durable only after `sync_tree` of a folder above it."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(path, "xb") as handle:
            handle.write(data)

    def sync_tree(self, root: Path) -> None:
        """Make every file and folder under `root` durable: one `syncfs`, else an fsync of each."""
        if sync_filesystem(root):
            return
        for folder, _, names in os.walk(root):
            for name in names:
                fsync_path(os.path.join(folder, name))
            self.sync_dir(Path(folder))

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
        fsync_path(path)
