"""Source-archive benchmark: peak memory and time of the confined reader on a 1 GiB source archive.

The archive is generated in a temporary directory: 32 files of 32 MiB of synthetic SQL-like text
(a 1 MiB block of seeded pseudo-random words, repeated, so gzip compresses it roughly 3-4x but cannot
collapse it the way it collapses zeros), written as tar.gz at gzip level 1, and again as a deflate
zip at level 1 (one row each: both formats are parsed by dpone's own bounded readers). The note reports the
archive's size on disk next to the content size, so the compression is counted honestly.

Both sides run in a fresh subprocess each, and memory is that process's peak resident set size
(`resource.getrusage(...).ru_maxrss`), interpreter and imports included. The baseline is Python's
own `tarfile.extractall(filter="data")` (or `zipfile.extractall`) of the same archive: one pass, no
pre-scan, no hashing.
The one thing a reader could get wrong: the reader under test does two full passes (pre-scan, then
extract) and hashes both, so its time ratio against the one-pass baseline is expected to be ~2-3x;
the goal of this row is the memory ceiling, not the time.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

FILE_COUNT = 32
FILE_MIB = 32
GOAL_PEAK_MB = 200

_CHILD = r"""
import json, resource, sys, time
mode, archive, work = sys.argv[1:4]
if mode == "idle":
    import dpone_dagster.release.source.snapshot
    elapsed = 0.0
elif mode == "baseline":
    import tarfile, zipfile
    start = time.perf_counter()
    if archive.endswith(".zip"):
        with zipfile.ZipFile(archive) as handle:
            handle.extractall(work)
    else:
        with tarfile.open(archive, "r:gz") as handle:
            handle.extractall(work, filter="data")
    elapsed = time.perf_counter() - start
else:
    from dpone_dagster.release.source.snapshot import SourceLimits, open_source
    limits = SourceLimits(max_file_bytes=64 * 1024**2, max_total_bytes=2 * 1024**3, max_members=1000)
    start = time.perf_counter()
    tree = open_source(archive, work_dir=work, limits=limits)
    elapsed = time.perf_counter() - start
    assert len(tree.snapshot.files) == int(sys.argv[4])
    tree.close()
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_mb": peak_kib / 1024}))
"""


class _SyntheticFile(io.RawIOBase):
    """`size` bytes of a repeated block, each block prefixed by its own counter line."""

    def __init__(self, block: bytes, size: int, label: int) -> None:
        super().__init__()
        self._block = block
        self._left = size
        self._label = label
        self._counter = 0
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        if self._left <= 0:
            return 0
        if not self._pending:
            self._counter += 1
            header = f"-- synthetic file {self._label} block {self._counter}\n".encode()
            self._pending = header + self._block[len(header) :]
        count = min(len(buffer), len(self._pending), self._left)
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        self._left -= count
        return count


def _block(size: int = 1024 * 1024) -> bytes:
    rng = random.Random(1729)
    words = [
        "select",
        "insert",
        "orders",
        "customer_id",
        "amount_cents",
        "status",
        "flow_marts",
        "where",
        "group",
        "by",
    ]
    words += [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_") for _ in range(rng.randint(3, 12))) for _ in range(2000)
    ]
    out = bytearray()
    while len(out) < size:
        out += (" ".join(rng.choice(words) for _ in range(12)) + f" {rng.randint(0, 10**9)};\n").encode()
    return bytes(out[:size])


def make_archive(path: Path, *, file_count: int = FILE_COUNT, file_mib: int = FILE_MIB) -> int:
    """Write the synthetic tar.gz; return the content bytes it holds."""
    block = _block()
    size = file_mib * 1024 * 1024
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as compressed:
        with tarfile.open(fileobj=compressed, mode="w|", format=tarfile.PAX_FORMAT) as archive:
            for index in range(file_count):
                info = tarfile.TarInfo(f"flows/bulk/part_{index:03d}.sql")
                info.size = size
                archive.addfile(info, io.BufferedReader(_SyntheticFile(block, size, index), buffer_size=1024 * 1024))
    return file_count * size


def make_zip(path: Path, *, file_count: int = FILE_COUNT, file_mib: int = FILE_MIB) -> int:
    """The same synthetic content as a deflate (level 1) zip; return the content bytes it holds."""
    block = _block()
    size = file_mib * 1024 * 1024
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for index in range(file_count):
            info = zipfile.ZipInfo(f"flows/bulk/part_{index:03d}.sql", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type, info.file_size = zipfile.ZIP_DEFLATED, size
            with archive.open(info, "w") as out:
                reader = io.BufferedReader(_SyntheticFile(block, size, index), buffer_size=1024 * 1024)
                while chunk := reader.read(1024 * 1024):
                    out.write(chunk)
    return file_count * size


def _child(mode: str, archive: Path, work: Path, files: int) -> dict[str, float]:
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(archive), str(work), str(files)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def run() -> list[dict]:
    file_count = int(os.environ.get("DPONE_BENCH_ARCHIVE_FILES", FILE_COUNT))
    rows = []
    for kind, make in (("tar.gz", make_archive), ("zip", make_zip)):
        with tempfile.TemporaryDirectory(prefix="dpone-bench-archive-") as scratch:
            root = Path(scratch)
            archive = root / f"source.{kind}"
            content = make(archive, file_count=file_count)
            on_disk = archive.stat().st_size
            idle = _child("idle", archive, root / "idle", file_count)
            baseline = _child("baseline", archive, root / "baseline", file_count)
            subprocess.run(["rm", "-rf", str(root / "baseline")], check=True)
            measured = _child("reader", archive, root / "reader", file_count)
        rows.append(_row(kind, content, on_disk, file_count, idle, baseline, measured))
    return rows


def _row(kind: str, content: int, on_disk: int, file_count: int, idle: dict, baseline: dict, measured: dict) -> dict:
    peak = measured["peak_mb"]
    verdict = "meets" if peak <= GOAL_PEAK_MB else "MISSES"
    reference = "tarfile.extractall(filter='data')" if kind == "tar.gz" else "zipfile.extractall"
    return {
        "name": f"open_source on a {content / 1024**3:.2f} GiB {kind} (pre-scan + extract, hashed) vs {reference}",
        "baseline_s": baseline["seconds"],
        "measured_s": measured["seconds"],
        "ratio": measured["seconds"] / baseline["seconds"],
        "goal": f"peak RSS <= {GOAL_PEAK_MB} MB",
        "note": (
            f"peak RSS {peak:.0f} MB ({verdict} goal); idle interpreter with imports {idle['peak_mb']:.0f} MB; "
            f"extractall baseline {baseline['peak_mb']:.0f} MB; archive {on_disk / 1024**2:.0f} MiB on disk for "
            f"{content / 1024**2:.0f} MiB of content in {file_count} files"
        ),
    }


if __name__ == "__main__":
    for row in run():
        print(json.dumps(row, indent=2))
