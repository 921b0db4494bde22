"""Building blocks of a DuckLake ATTACH: catalog location, options, storage secret.

Each lake is attached with `ATTACH IF NOT EXISTS 'ducklake:<catalog>' AS <alias> (<options>)`. The
options come from the lake's settings (`attach_args`) followed by the options this project owns, so
that under DuckDB's rule for duplicated options — the *last* occurrence wins, silently — ours win.

A PostgreSQL catalog's password never appears in the ATTACH text (which `duckdb_databases()`
shows to any SQL on the connection): the statement first creates a temporary DuckDB secret of
TYPE postgres holding only the password, and the ATTACH names it with `META_SECRET`; DuckDB's
postgres scanner merges it with the libpq string's host, database and user.

What a reader could get wrong: stripping is by option name in any letter case; keeping a
settings-supplied `DATA_PATH` before ours is not enough, because whoever renders the statement
later could append options after ours. That is why reserved options are removed, not merely
overridden. (User SQL never attaches: `lake/guard/checker.py` refuses every ATTACH/DETACH in it.)
An attach statement with a catalog password is two SQL statements in one text (secret, then
ATTACH), run by one `execute`; `duckdb_secrets()` shows the secret redacted, and user SQL may not
call it (`lake/guard/functions.py`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.config import LakeConfig, StorageConfig
from dpone_dagster.errors import LakeError
from dpone_dagster.lake.guard.statement import CredentialResolver, Secret, Statement, quote_ident, sql_string

OptionValue = str | int | bool
Options = tuple[tuple[str, OptionValue], ...]

FORK_RESERVED_OPTIONS = frozenset({"METADATA_SCHEMA", "DATA_PATH", "OVERRIDE_DATA_PATH", "METADATA_PATH"})
"""Options a fork always sets itself; stripped from settings and user SQL in fork mode.
`METADATA_PATH` names the catalog database itself: left in, it would point a fork (or an ancestor
attach) at another lake's catalog."""

ANCESTOR_OWNED_OPTIONS = FORK_RESERVED_OPTIONS | {
    "READ_ONLY",
    "AUTOMATIC_MIGRATION",
    "CREATE_IF_NOT_EXISTS",
    "MIGRATE_IF_REQUIRED",
    "METADATA_CATALOG",
    # an ancestor is read live, or at the fork's pin (`lake/resolution/pins.py`), never as settings say
    "SNAPSHOT_VERSION",
}
"""Options an ancestor attach always sets itself: it must never write, migrate or create. A named
`METADATA_CATALOG` stays with the fork's own attach (one name cannot serve two attaches)."""

COMMIT_RETRY_SETTINGS = (
    ("ducklake_max_retry_count", "20"),
    ("ducklake_retry_wait_ms", "50"),
    ("ducklake_retry_backoff", "1.3"),
)
"""How DuckLake retries a commit that lost the race for the next snapshot id to another process
(PostgreSQL catalog: run workers, dbt, the prod job committing to one catalog at once). DuckLake's
default (10 retries from 100 ms, x1.5) gives up after ~8 s of contention; these wait up to ~24 s
(last wait ~7 s) before a conflict surfaces. Set GLOBAL: dbt-duckdb's cursors are other sessions."""

COMMIT_RETRY = tuple(Statement.of(f"SET GLOBAL {name} = {value}") for name, value in COMMIT_RETRY_SETTINGS)

_OPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class InvalidAttachOptionError(LakeError):
    code = "lake.invalid_attach_option"


class UnsupportedCatalogError(LakeError):
    code = "lake.unsupported_catalog"


def normalize_options(args: Mapping[str, OptionValue] | Iterable[tuple[str, OptionValue]]) -> Options:
    """Upper-case option names (refusing anything that is not a plain identifier), order kept."""
    pairs = args.items() if isinstance(args, Mapping) else args
    out: list[tuple[str, OptionValue]] = []
    for name, value in pairs:
        if not isinstance(name, str) or not _OPTION_NAME.match(name):
            raise InvalidAttachOptionError("an ATTACH option name must be a plain identifier")
        if not isinstance(value, str | int | bool):
            raise InvalidAttachOptionError(f"ATTACH option {name.upper()} has an unsupported value type")
        out.append((name.upper(), value))
    return tuple(out)


def strip_options(options: Options, names: frozenset[str]) -> Options:
    return tuple((name, value) for name, value in options if name.upper() not in names)


def option_value(options: Options, name: str) -> OptionValue | None:
    """The value DuckDB would use for `name`: the last occurrence."""
    found: OptionValue | None = None
    for key, value in options:
        if key.upper() == name:
            found = value
    return found


def render_value(value: OptionValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return sql_string(value)


def render_options(options: Options) -> str:
    return ", ".join(f"{name} {render_value(value)}" for name, value in options)


@dataclass(frozen=True)
class CatalogLocation:
    """Where a DuckLake's metadata lives, without credentials.

    `kind` is `duckdb` (a file path), `postgres` (a libpq string), `sqlite` or `mysql`.
    """

    kind: str
    target: str
    password_env: str | None = None

    def uri_parts(self) -> tuple[str | Secret, ...]:
        """The parts of the quoted `'ducklake:…'` literal. A PostgreSQL password is not among them
        (`password_part`); MySQL, whose scanner is not shipped, keeps it in the libpq string."""
        prefix = {"duckdb": "", "postgres": "postgres:", "sqlite": "sqlite:", "mysql": "mysql:"}[self.kind]
        body = sql_string(f"ducklake:{prefix}{self.target}")[:-1]
        if self.password_env and self.kind == "mysql":
            return (body + " ", Secret(self.password_env, in_libpq_literal=True), "'")
        return (body + "'",)

    def password_part(self) -> Secret | None:
        """The PostgreSQL catalog password as a reference, rendered into a DuckDB secret."""
        return Secret(self.password_env) if self.password_env and self.kind == "postgres" else None

    def connect_password(self, credentials: CredentialResolver) -> str | None:
        """The password a direct connection (not an ATTACH) presents, read at the moment of use."""
        return credentials(self.password_env) if self.password_env else None

    def sibling(self, stem: str) -> CatalogLocation:
        """For a DuckDB-file catalog: the catalog file `<stem>.ducklake` next to this one."""
        if self.kind != "duckdb":
            raise UnsupportedCatalogError("only DuckDB-file catalogs have sibling catalog files")
        return CatalogLocation("duckdb", str(Path(self.target).parent / f"{stem}.ducklake"))

    @property
    def identity(self) -> str:
        """Stable, credential-free text naming this catalog (the cleanup ledger's `catalog`)."""
        return f"{self.kind}:{self.target}"


def catalog_location(lake: LakeConfig, project_root: Path) -> CatalogLocation:
    kind = lake.catalog_kind
    if kind == "duckdb":
        path = Path(lake.catalog)
        return CatalogLocation("duckdb", str(path if path.is_absolute() else project_root / path))
    body = lake.catalog.split(":", 1)[1]
    if kind == "sqlite":
        path = Path(body)
        body = str(path if path.is_absolute() else project_root / path)
    return CatalogLocation(kind, body, lake.catalog_password_env)


def absolute_data_path(data_path: str, project_root: Path) -> str:
    """The lake's DATA_PATH, local paths made absolute, always ending with `/`."""
    if "://" in data_path:
        return data_path if data_path.endswith("/") else data_path + "/"
    path = Path(data_path)
    text = str(path if path.is_absolute() else project_root / path)
    return text if text.endswith("/") else text + "/"


def attach_statement(location: CatalogLocation, alias: str, options: Options) -> Statement:
    """`ATTACH IF NOT EXISTS 'ducklake:…' AS alias (options)`, preceded by the temporary secret
    that carries the catalog password when there is one (see module docstring)."""
    password = location.password_part()
    uri = location.uri_parts()
    if password is not None:
        shown = "".join(p if isinstance(p, str) else "" for p in uri)
        name = "__dpone_pg_" + hashlib.sha256(f"{alias}\0{shown}".encode()).hexdigest()[:8]
        options = (*strip_options(options, frozenset({"META_SECRET"})), ("META_SECRET", name))
    tail = f" AS {quote_ident(alias)}" + (f" ({render_options(options)})" if options else "")
    if password is None:
        return Statement(("ATTACH IF NOT EXISTS ", *uri, tail))
    head = f"CREATE OR REPLACE TEMPORARY SECRET {name} (TYPE postgres, PASSWORD "
    return Statement((head, password, "); ATTACH IF NOT EXISTS ", *uri, tail))


S3_ACCESS = ("owner", "read", "fork")
"""Whose S3 credentials a secret carries: the lake's own (`key_id_env`), read-only ones for an
ancestor's data path (`read_only_key_id_env`), or the fork's own (`fork_key_id_env`)."""


def s3_credential_envs(storage: StorageConfig, access: str) -> tuple[tuple[str, str | None], ...]:
    """(option, env name) pairs of the secret for `access`, or () when that kind is not configured."""
    if access == "read":
        pairs = (("KEY_ID", storage.read_only_key_id_env), ("SECRET", storage.read_only_secret_env))
    elif access == "fork":
        pairs = (("KEY_ID", storage.fork_key_id_env), ("SECRET", storage.fork_secret_env))
    else:
        return (
            ("KEY_ID", storage.key_id_env),
            ("SECRET", storage.secret_env),
            ("SESSION_TOKEN", storage.session_token_env),
        )
    return pairs if all(env for _, env in pairs) else ()


def storage_secret_statement(storage: StorageConfig | None, data_path: str, access: str = "owner") -> Statement | None:
    """`CREATE OR REPLACE TEMPORARY SECRET` for an `s3://` data path, scoped to that path.

    DuckDB picks the secret with the longest matching SCOPE, so an ancestor's path read with
    `access="read"` and the fork's `__wm_forks/<segment>/` path written with `access="fork"` each
    get their own credentials. When the requested kind is not configured the lake's own
    credentials are used, and the caller is told (`s3_credential_envs` returns `()`)."""
    if not data_path.startswith("s3://"):
        return None
    if access not in S3_ACCESS:
        raise InvalidAttachOptionError(f"unknown S3 access kind {access!r}")
    storage = storage or StorageConfig()
    envs = s3_credential_envs(storage, access) or s3_credential_envs(storage, "owner")
    keyed = data_path if access == "owner" else f"{access}\0{data_path}"
    name = "__dpone_s3_" + hashlib.sha256(keyed.encode()).hexdigest()[:8]
    parts: list[str | Secret] = [f"CREATE OR REPLACE TEMPORARY SECRET {name} (TYPE s3"]
    for option, env in envs:
        if env:
            parts += [f", {option} ", Secret(env)]
    parts.append(f", REGION {sql_string(storage.region)}")
    if storage.endpoint:
        parts.append(f", ENDPOINT {sql_string(storage.endpoint)}")
    parts.append(f", URL_STYLE {sql_string(storage.url_style)}")
    parts.append(f", USE_SSL {'true' if storage.use_ssl else 'false'}")
    parts.append(f", SCOPE {sql_string(data_path)})")
    return Statement(tuple(parts))
