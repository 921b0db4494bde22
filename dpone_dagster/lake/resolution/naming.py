"""Names of everything a fork data environment creates: metadata schema, ancestor alias, data prefix.

PERSISTED STATE DEPENDS ON THESE FUNCTIONS. A fork's metadata schema (PostgreSQL) or sibling catalog
file (DuckDB), its `__wm_forks/<segment>/` data prefix, and the ancestor aliases stored inside its
defer views are all derived here and written to catalogs, object stores and the cleanup ledger.
Changing any output for an existing input orphans data or breaks stored views. They must never
change; the golden vectors in `tests/lake/test_naming.py` pin them.

Incarnations: a fork id re-created after a drop is a new incarnation (a random id stored in the
control store), and its metadata schema / sibling file and data segment are distinct, so no process
holding the old incarnation can write into, and no new incarnation can re-attach, the old place.
The legacy incarnation `""` (forks created before incarnations) keeps the original names exactly.

Shapes (mangle = lowercase, every non-alphanumeric to `_`, then truncated; hash8 = first 4 bytes
of SHA-256 as hex; `\\0` separates the hashed parts so no pair of inputs concatenates alike):
- `fork_metadata_schema(ws, lake, inc)` = `wm_fork_<ws,24>_<lake,16>_<hash8(ws\\0lake[\\0inc])>` (≤ 58)
- `ancestor_alias(lake, ws)`       = `__wm_dl_<lake,20>_<ws,20>_<hash8(lake\\0ws)>` (≤ 58 chars)
- `fork_segment(ws, inc)`          = `<ws,40>_<hash8(ws[\\0inc])>` (one path component, no `/`)
- `fork_data_path(ws, data_path, inc)` = `<storage root>/__wm_forks/<segment>/<path under root>`
  (`[\\0inc]` is hashed only for a non-empty incarnation)
- `lake_alias(lake)`               = `lake_<lake>` (DuckDB reserves `main`, the default lake's name)
- `fork_catalog_file(parent, stem)` = `<folder of parent>/<stem>/<stem>.ducklake` (a DuckDB-file
  fork catalog in a folder of its own; `legacy_fork_catalog_file` = `<folder of parent>/<stem>.ducklake`,
  where forks made before folders keep theirs: see `lake/resolution/fork.py` and docs/forks.md)

What a reader could get wrong: the fork data prefix sits at the *storage root* (the bucket for
`s3://`; the parent folder of the lake's directory for local paths), never under the parent's data
path — the parent's orphan-file sweep deletes everything under its own path. Mangled parts may
collide (`a-b` and `a_b` both mangle to `a_b`); the hash keeps the names injective.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import PurePath, PurePosixPath

from dpone_dagster.errors import LakeError

FORK_SCHEMA_PREFIX = "wm_fork_"
ANCESTOR_ALIAS_PREFIX = "__wm_dl_"
FORK_DATA_DIR = "__wm_forks"
LAKE_ALIAS_PREFIX = "lake_"
MAX_IDENTIFIER_LENGTH = 63

_NON_ALNUM = re.compile(r"[^a-z0-9]")
_URL = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<bucket>[^/]+)(?:/(?P<key>.*))?$")


class DataPathError(LakeError):
    code = "lake.invalid_data_path"


def mangle(value: str, width: int) -> str:
    """Lowercase, every character outside `[a-z0-9]` becomes `_`, truncated to `width`."""
    return _NON_ALNUM.sub("_", value.lower())[:width]


def hash8(*parts: str) -> str:
    """First 4 bytes of SHA-256 over the NUL-joined parts, as 8 lowercase hex digits."""
    return hashlib.sha256("\0".join(parts).encode("utf-8")).hexdigest()[:8]


def _with_incarnation(parts: tuple[str, ...], incarnation: str) -> tuple[str, ...]:
    return (*parts, incarnation) if incarnation else parts


def fork_metadata_schema(workspace_id: str, lake: str, incarnation: str = "") -> str:
    """Metadata schema (PostgreSQL) or catalog-file stem (DuckDB) of `lake` in fork `workspace_id`."""
    return (
        f"{FORK_SCHEMA_PREFIX}{mangle(workspace_id, 24)}_{mangle(lake, 16)}_"
        f"{hash8(*_with_incarnation((workspace_id, lake), incarnation))}"
    )


def fork_catalog_file(parent_catalog_file: str, stem: str) -> str:
    """A fork's DuckDB catalog file: `<stem>/<stem>.ducklake` beside the parent's catalog file.

    A folder of its own, so the kernel can let a fork's processes create and delete there (the
    catalog's `.wal`) while the parent's catalog in the folder above stays read-only to them."""
    return str(PurePosixPath(parent_catalog_file).parent / stem / f"{stem}.ducklake")


def legacy_fork_catalog_file(parent_catalog_file: str, stem: str) -> str:
    """Where fork catalogs made before `fork_catalog_file` sit: `<stem>.ducklake` beside the parent's."""
    return str(PurePosixPath(parent_catalog_file).parent / f"{stem}.ducklake")


def ancestor_alias(lake: str, ancestor_id: str) -> str:
    """Catalog alias under which `ancestor_id`'s copy of `lake` is attached READ_ONLY in a fork."""
    return f"{ANCESTOR_ALIAS_PREFIX}{mangle(lake, 20)}_{mangle(ancestor_id, 20)}_{hash8(lake, ancestor_id)}"


def fork_segment(workspace_id: str, incarnation: str = "") -> str:
    """The single path component that holds all of one fork incarnation's data files."""
    return f"{mangle(workspace_id, 40)}_{hash8(*_with_incarnation((workspace_id,), incarnation))}"


def is_fork_segment_of(workspace_id: str, segment: str) -> bool:
    """True when `segment` has the shape `fork_segment(workspace_id, <some incarnation>)` gives."""
    return re.fullmatch(re.escape(mangle(workspace_id, 40)) + r"_[0-9a-f]{8}", segment) is not None


def lake_alias(lake: str) -> str:
    """The catalog alias user SQL and dbt use for `lake` (same in a fork and in its parent)."""
    return f"{LAKE_ALIAS_PREFIX}{lake}"


def is_fork_schema(name: str) -> bool:
    """True only for names this module could have produced as a fork metadata schema."""
    return (
        name.startswith(FORK_SCHEMA_PREFIX)
        and len(name) <= MAX_IDENTIFIER_LENGTH
        and re.fullmatch(r"[a-z0-9_]+", name) is not None
        and re.fullmatch(r"[0-9a-f]{8}", name[-8:]) is not None
        and name[-9] == "_"
    )


def split_storage_root(data_path: str) -> tuple[str, str]:
    """Split a data path into (storage root, path under the root), both without edge slashes.

    `s3://bucket/a/b/` → (`s3://bucket`, `a/b`); `/x/lakes/main/` → (`/x/lakes`, `main`).
    """
    match = _URL.match(data_path)
    if match:
        root = f"{match.group('scheme')}://{match.group('bucket')}"
        return root, (match.group("key") or "").strip("/")
    if "://" in data_path:
        raise DataPathError("a data path URL must look like scheme://bucket/prefix/")
    path = PurePosixPath(data_path)
    if not path.name:
        raise DataPathError("a local data path must name a folder below some parent folder, not a filesystem root")
    return str(path.parent), path.name


def fork_storage_prefix(workspace_id: str, data_path: str, incarnation: str = "") -> str:
    """`<storage root>/__wm_forks/<segment>/`: everything the fork wrote at this root, and nothing else."""
    root, _ = split_storage_root(data_path)
    return f"{root.rstrip('/')}/{FORK_DATA_DIR}/{fork_segment(workspace_id, incarnation)}/"


def fork_data_path(workspace_id: str, data_path: str, incarnation: str = "") -> str:
    """The fork's DATA_PATH for a lake whose own DATA_PATH is `data_path` (ends with `/`)."""
    _, under = split_storage_root(data_path)
    if not under:
        raise DataPathError(
            "a lake whose data path is a bucket root cannot be forked: the fork's files would sit "
            "under the parent's data path, where the parent's orphan-file sweep deletes them"
        )
    prefix = fork_storage_prefix(workspace_id, data_path, incarnation)
    return f"{prefix}{under}/"


def is_own_folder(catalog_file: PurePath) -> bool:
    """True when `catalog_file` sits in a folder of its own (named like the file's stem)."""
    return catalog_file.parent.name == catalog_file.name.removesuffix(".ducklake")


def metadata_catalog(alias: str, metadata_catalog_option: object = None) -> str:
    """The name under which DuckLake attaches the catalog database of the lake attached as `alias`:
    the `METADATA_CATALOG` option when given, else DuckLake's default `__ducklake_metadata_<alias>`."""
    return str(metadata_catalog_option) if metadata_catalog_option else f"__ducklake_metadata_{alias}"
