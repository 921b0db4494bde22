"""Which files user SQL may write and which it may not open: paths resolved the way DuckDB and the OS do.

`FileRules` holds, for one connection, the roots it may write below — its lake's own data path (a
fork's `__wm_forks/<segment>/…` prefix; prod's own data path) and a temp folder — and the catalog
files it knows. A write target is allowed only when it is *provably* inside a root:
- local paths: `file://` / `file:` stripped (DuckDB accepts both), relative paths joined to the
  working directory (DuckDB writes relative to it, whatever `file_search_path` says), `~` refused,
  glob characters refused, then `os.path.realpath` (symlinks and `..` of the existing part resolved
  as the kernel resolves them), compared by whole path components;
- remote URLs (`s3://…`): the same scheme and bucket as a root, the key compared by segments, and
  nothing a server or DuckDB might rewrite (`.`/`..`/empty segments, `%`, `?`, `#`, `\\`, globs).
The temp folder is `tempfile.gettempdir()` (the process's TMPDIR; kernel confinement points it at
a private folder) and only when it overlaps none of the lake's protected places — the catalog
folders and the local storage root that holds the parent's data and every fork prefix. `/tmp` on a
machine whose lakes live under `/tmp` is therefore not writable at all.

Reads are free except for database files: DuckDB opens `.duckdb`/`.db` files by path (`FROM
'x.db'`, `read_duckdb`) and `read_blob`/`read_text` read any file, so a path naming a database or
catalog file, a WAL, or one of this lake's catalog files (after symlinks; globs expanded locally) is
refused (`lake.foreign_database`).

What a reader could get wrong: this is a check made before DuckDB runs. A symlink planted between
the check and the write (by user Python — SQL cannot make one) is beyond it; on the embedded default
that race is closed below DuckDB by kernel confinement (`dpone_dagster/confinement`).
"""

from __future__ import annotations

import glob
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass

from dpone_dagster.lake.guard.lexer import SqlGuardError

DATABASE_FILE_SUFFIXES = (".ducklake", ".duckdb", ".ddb", ".db", ".sqlite", ".sqlite3", ".wal")
"""A name ending like this is a database file DuckDB (or a scanner) could open by path."""

GLOB_CHARACTERS = frozenset("*?[{")
_REMOTE = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<bucket>[^/]*)(?P<key>/.*)?$")
_REMOTE_FORBIDDEN = frozenset("%?#\\") | GLOB_CHARACTERS
_SCHEME_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
MAX_GLOB_MATCHES = 10_000


class FileWriteOutsideNamespaceError(SqlGuardError):
    code = "lake.file_write_outside_namespace"


class ForeignDatabaseError(SqlGuardError):
    code = "lake.foreign_database"


def _strip_file_scheme(text: str) -> str:
    for prefix in ("file://", "file:"):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            if not rest.startswith("/"):
                raise FileWriteOutsideNamespaceError("a file: URL must name an absolute path")
            return rest
    return text


def local_path(text: str) -> str:
    """The absolute, symlink-free path DuckDB would open for the local path `text`."""
    text = _strip_file_scheme(text)
    if not text or text.startswith("~") or "\0" in text or _SCHEME_LIKE.match(text):
        raise FileWriteOutsideNamespaceError(
            "a path that is empty, starts with ~ or looks like a URL scheme cannot be proven safe"
        )
    return os.path.realpath(os.path.join(os.getcwd(), text))


def is_remote(text: str) -> bool:
    return "://" in text and not text.startswith("file:")


def remote_path(text: str) -> tuple[str, str, tuple[str, ...]]:
    """(scheme, bucket, key segments) of a remote URL whose text nothing could rewrite."""
    match = _REMOTE.match(text)
    if not match or not match.group("bucket") or any(c in _REMOTE_FORBIDDEN for c in text):
        raise FileWriteOutsideNamespaceError("a remote path with escapes, globs or no bucket cannot be proven safe")
    segments = tuple((match.group("key") or "/")[1:].split("/"))
    if any(s in (".", "..") for s in segments) or any(s == "" for s in segments[:-1]):
        raise FileWriteOutsideNamespaceError("a remote path with '.', '..' or '//' segments cannot be proven safe")
    return match.group("scheme"), match.group("bucket"), tuple(s for s in segments if s)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _overlaps(a: str, b: str) -> bool:
    return _inside(a, b) or _inside(b, a)


def write_root(location: str) -> str:
    """A write root as `FileRules` compares it: local realpath, or `scheme://bucket/key`."""
    if is_remote(location):
        scheme, bucket, segments = remote_path(location)
        return f"{scheme}://{bucket}/" + "/".join(segments)
    return local_path(location)


@dataclass(frozen=True)
class FileRules:
    """Where one connection may write files, and which local catalog files it knows of."""

    writable: tuple[str, ...] = ()
    catalog_files: frozenset[str] = frozenset()

    @classmethod
    def for_lake(cls, data_path: str, catalog_files: Iterable[str], storage_root: str | None) -> FileRules:
        """The lake's own `data_path`, plus the temp folder when it overlaps no protected place
        (the folders of `catalog_files` and the local `storage_root`)."""
        catalogs = frozenset(local_path(c) for c in catalog_files)
        protected = [os.path.dirname(c) for c in catalogs]
        if storage_root and not is_remote(storage_root):
            protected.append(local_path(storage_root))
        elif not is_remote(data_path):
            protected.append(os.path.dirname(local_path(data_path)))
        roots = [write_root(data_path)]
        temp = local_path(tempfile.gettempdir())
        if not any(_overlaps(temp, place) for place in protected):
            roots.append(temp)
        return cls(tuple(roots), catalogs)

    def check_write(self, text: str, what: str) -> None:
        """Refuse unless `text` (a path DuckDB will write or create) is provably inside a root."""
        if any(c in GLOB_CHARACTERS for c in text):
            raise FileWriteOutsideNamespaceError(f"{what} names a path with glob characters; it is refused")
        if is_remote(text):
            scheme, bucket, segments = remote_path(text)
            target = f"{scheme}://{bucket}/" + "/".join(segments)
        else:
            target = local_path(text)
        if not any(_inside(target, root) for root in self.writable):
            raise FileWriteOutsideNamespaceError(
                f"{what} writes outside this lake's own data path and temp folder; it is refused "
                "(a fork writes only its own namespace)"
            )

    def check_read(self, text: str, *, expand: bool) -> None:
        """Refuse a path that names (or, with `expand`, globs onto) a database or catalog file."""
        if _database_name(text):
            raise ForeignDatabaseError("opening a database or catalog file by path is refused in user SQL")
        if is_remote(text) or not expand:
            return
        try:
            path = local_path(text)
        except FileWriteOutsideNamespaceError:
            return  # `~` and the like: DuckDB expands them, the suffix rule above already ran
        matches = glob.iglob(path, recursive=True) if any(c in GLOB_CHARACTERS for c in path) else iter([path])
        for count, match in enumerate(matches):
            if count >= MAX_GLOB_MATCHES:
                raise ForeignDatabaseError("a glob matching more files than the guard checks is refused")
            real = os.path.realpath(match)
            if real in self.catalog_files or _database_name(real) or _database_name(match):
                raise ForeignDatabaseError("a path that reaches a database or catalog file is refused")


def _database_name(text: str) -> bool:
    name = text.rstrip("/").rsplit("/", 1)[-1].lower()
    return name.endswith(DATABASE_FILE_SUFFIXES)


def safe_file_name_part(value: str, option: str) -> None:
    """A COPY `FILENAME_PATTERN` / `FILE_EXTENSION` (or `filename_pattern=`) must stay one name."""
    if "/" in value or "\\" in value or ".." in value:
        raise FileWriteOutsideNamespaceError(f"{option} may not contain '/', '\\\\' or '..'")
