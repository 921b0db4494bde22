"""The one typed configuration of dpone-dagster, and the one place that reads the environment.

Configuration comes from `dpone.yaml` at the project root (or the `[tool.dpone]` table of its
pyproject.toml), then environment overrides. The project root is never implicit (`find_project_root`):
a command run outside any project refuses with `config.project_root_missing` rather than creating a
lake where it happens to run, and an installed package never puts state into its own source tree.
`dbt_project_dir` has no default: reading it unset fails with `config.dbt_project_unset`.

Nothing else in the project reads environment variables for configuration; resources and services
receive a `DponeConfig`. The one exception is the dbt-duckdb plugin, which runs inside dbt's own
process and receives the run's workspace and target tables through `DPONE_WORKSPACE` /
`DPONE_DBT_TARGETS`, set by the dbt asset for that call.

The embedded `main` lake turns DuckLake data inlining off (`DATA_INLINING_ROW_LIMIT 0`), so even a
10-row incremental merge lands in parquet files rather than in the catalog.

Credentials are configured *by reference*: a lake names the environment variables that hold its
storage keys or catalog password, never the values. `resolve_secret()` reads a referenced variable at
the moment of use; the values never enter a model, so they cannot leak through `repr`, logs,
metadata or errors.

Environment overrides (all optional):
- `DPONE_PROJECT_ROOT`   project root (default: the nearest folder at or above the working directory
                         holding `dpone.yaml` or a pyproject.toml with a `[tool.dpone]` table, as git
                         finds `.git`; else the folder of `DPONE_CONFIG`; else `config.project_root_missing`)
- `DPONE_CONFIG`         explicit path to a YAML file instead of `<root>/dpone.yaml`
- `DPONE_STATE_DIR`      state directory (default `<root>/.dpone`)
- `DPONE_CONTROL_STORE_URL`  SQLAlchemy URL of the control store (default SQLite `<state>/control/control.sqlite`)
- `DPONE_WORKSPACE`      current workspace (default `prod`)
- `DPONE_LAKE_<NAME>_CATALOG`, `DPONE_LAKE_<NAME>_DATA_PATH`  per-lake overrides
- `DPONE_RELEASE_SOURCE_COMMIT`  the commit the platform checked out (needs a `release:` section)
- `DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT=1` with `DAGSTER_CLOUD_GIT_BRANCH` / `DAGSTER_CLOUD_PULL_REQUEST_ID`
  (and `DAGSTER_CLOUD_PULL_REQUEST_STATUS`): a Dagster+ branch deployment; the workspace becomes
  the branch's throwaway fork (`branch_fork_id`), created from `forks.branch_parent`
  (`dpone_dagster.workspaces.branch`)

A `release:` section configures the release platform (`ReleaseConfig`): where signed grants are
dropped, the protected target file, the registry, the cache and the source checkout. Without it the
release surface runs on the SYNTHETIC embedded default under the state directory.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dpone_dagster.contracts.bounds import GitCommit, RepositoryName
from dpone_dagster.contracts.workspace_ids import branch_fork_id
from dpone_dagster.errors import ConfigError, DponeError

CONFIG_FILE_NAME = "dpone.yaml"
DEFAULT_LAKE = "main"
DEFAULT_WORKSPACE = "prod"
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")
_LAKE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

CatalogKind = Literal["duckdb", "postgres", "sqlite", "mysql"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StorageConfig(_Closed):
    """How to reach object storage for `s3://` data paths. Secrets are env-var *names*."""

    endpoint: str | None = Field(default=None, description="host:port of an S3-compatible endpoint")
    region: str = "us-east-1"
    url_style: Literal["path", "vhost"] = "vhost"
    use_ssl: bool = True
    key_id_env: str | None = None
    secret_env: str | None = None
    session_token_env: str | None = None
    read_only_key_id_env: str | None = Field(
        default=None, description="env var holding a key that may only READ the lake's objects"
    )
    read_only_secret_env: str | None = None
    fork_key_id_env: str | None = Field(
        default=None,
        description="env var holding a key that may write only below `__wm_forks/<segment>/` "
        "(each fork's deployment puts its own fork's key there)",
    )
    fork_secret_env: str | None = None

    @field_validator(
        "key_id_env",
        "secret_env",
        "session_token_env",
        "read_only_key_id_env",
        "read_only_secret_env",
        "fork_key_id_env",
        "fork_secret_env",
    )
    @classmethod
    def _env_names_only(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("must be the NAME of an environment variable (A-Z, 0-9, _), not a value")
        return value


class LakeConfig(_Closed):
    """One DuckLake: catalog, data path, storage credentials by reference, extra ATTACH args.

    `catalog` is a DuckDB file path (the embedded default), `postgres:<libpq key=value string>`
    (no password in it: use `catalog_password_env`), `sqlite:<path>` or `mysql:<...>`.
    `data_path` is a local directory or `s3://bucket/prefix/`.
    """

    name: str
    catalog: str
    data_path: str
    catalog_password_env: str | None = None
    catalog_admin_user: str | None = Field(
        default=None,
        description="PostgreSQL role dpone provisions fork roles with (default: the catalog's user)",
    )
    catalog_admin_password_env: str | None = Field(
        default=None, description="env var holding that role's password (default: catalog_password_env)"
    )
    storage: StorageConfig | None = None
    storage_ref: str = Field(default="default", description="logical name of the storage identity")
    attach_args: dict[str, str | int | bool] = Field(default_factory=dict)
    defer: Literal["live", "pinned"] = Field(
        default="live",
        description="how a fork of this lake reads its ancestors: live (their current data) or "
        "pinned (at their snapshot when the fork was created, until `dpone fork repin`)",
    )

    @field_validator("name")
    @classmethod
    def _lake_name(cls, value: str) -> str:
        if not _LAKE_NAME.match(value):
            raise ValueError("lake names are lowercase identifiers: [a-z][a-z0-9_]*")
        return value

    @field_validator("catalog_password_env")
    @classmethod
    def _password_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("must be the NAME of an environment variable, not a value")
        return value

    @field_validator("catalog_admin_password_env")
    @classmethod
    def _admin_password_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError("must be the NAME of an environment variable, not a value")
        return value

    @field_validator("catalog_admin_user")
    @classmethod
    def _admin_user(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value):
            raise ValueError("must be a plain lowercase PostgreSQL role name")
        return value

    @field_validator("catalog")
    @classmethod
    def _no_inline_password(cls, value: str) -> str:
        if re.search(r"(?i)\bpassword\s*=", value) or re.search(r"://[^/@:]+:[^/@]+@", value):
            raise ValueError(
                "catalog strings must not contain a password; name an environment variable in "
                "catalog_password_env instead"
            )
        return value

    @property
    def catalog_kind(self) -> CatalogKind:
        lowered = self.catalog.lower()
        if lowered.startswith(("postgres:", "postgresql:")):
            return "postgres"
        if lowered.startswith("sqlite:"):
            return "sqlite"
        if lowered.startswith("mysql:"):
            return "mysql"
        return "duckdb"

    @property
    def is_s3(self) -> bool:
        return self.data_path.startswith("s3://")


class ReleaseConfig(_Closed):
    """A configured release platform; its presence turns the synthetic embedded default off.

    `authority_location` (where signed policies, grants and signatures are placed) and
    `registry_location` are local directories or `s3://bucket/prefix/` addresses; S3 is reached
    with `storage` (credentials by env-var name). `cache_root`, `protected_target_file` and
    `source_location` (a checkout or a source archive) are local. Relative paths are relative to
    the project root. The protected target file holds the pinned policy digest: only the platform
    writes it, never whoever can write to the authority location.
    """

    authority_location: str
    registry_location: str
    cache_root: Path
    protected_target_file: Path
    source_location: Path
    source_repository: RepositoryName
    source_commit: GitCommit
    storage: StorageConfig | None = None

    @field_validator("authority_location", "registry_location")
    @classmethod
    def _directory_or_s3(cls, value: str) -> str:
        if value.startswith("s3://"):
            bucket, _, _ = value.removeprefix("s3://").partition("/")
            if not bucket:
                raise ValueError("an s3:// location needs a bucket name")
        elif "://" in value or not value.strip():
            raise ValueError("must be a local directory or an s3://bucket/prefix/ address")
        return value

    @model_validator(mode="after")
    def _distinct_locations(self) -> ReleaseConfig:
        if self.authority_location.rstrip("/") == self.registry_location.rstrip("/"):
            raise ValueError("the authority location and the registry must be different locations")
        return self


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `12h`, `7d`, `2w` (one positive whole number and one unit) as a timedelta."""
    match = _DURATION.match(text or "")
    if not match or int(match.group(1)) <= 0:
        raise ConfigError(
            f"{text!r} is not a duration: write a positive whole number and one of s, m, h, d, w (e.g. 7d)",
            code="config.invalid_duration",
        )
    return timedelta(seconds=int(match.group(1)) * _DURATION_UNITS[match.group(2)])


class ForksConfig(_Closed):
    """Fork lifecycle settings. `ttl`: how long a throwaway fork may stay idle (no resolution, run
    or status read) before the janitor drops it, unless the fork was created with its own TTL.
    `require_confinement`: a process acting for a fork that the kernel does not confine
    (`dpone_dagster.confinement`) refuses to start instead of warning."""

    ttl: timedelta = timedelta(days=7)
    require_confinement: bool = Field(
        default=False,
        description="refuse to act for a fork where the kernel cannot confine the process "
        "(no Landlock, or a fork catalog made before catalog folders); default: warn once and go on",
    )
    branch_parent: str = Field(
        default=DEFAULT_WORKSPACE,
        description="the workspace a branch deployment's (or `dpone fork ensure`'s) fork is created from",
    )

    @field_validator("ttl", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        return parse_duration(value) if isinstance(value, str) and _DURATION.match(value) else value


BRANCH_DEPLOYMENT_ENV = (
    "DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT",
    "DAGSTER_CLOUD_GIT_BRANCH",
    "DAGSTER_CLOUD_PULL_REQUEST_ID",
    "DAGSTER_CLOUD_PULL_REQUEST_STATUS",
)
_PULL_REQUEST_GONE = ("CLOSED", "MERGED")


class BranchDeployment(_Closed):
    """The Dagster+ branch deployment this process runs in (`DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT=1`)."""

    branch: str | None = None
    pull_request_id: str | None = None
    pull_request_status: str | None = None

    @property
    def fork_id(self) -> str:
        return branch_fork_id(branch=self.branch, pull_request_id=self.pull_request_id)

    @property
    def pull_request_gone(self) -> bool:
        """The pull request is closed or merged: its fork is to be dropped, not created."""
        return (self.pull_request_status or "").strip().upper() in _PULL_REQUEST_GONE


class DponeConfig(_Closed):
    project_root: Path
    state_dir: Path = Path(".dpone")
    control_store_url: str | None = None
    workspace: str = DEFAULT_WORKSPACE
    lakes: tuple[LakeConfig, ...] = ()
    dbt_project_dir: Path | None = Field(
        default=None, description="the dbt project folder, relative to the project root (no default)"
    )
    release: ReleaseConfig | None = None
    forks: ForksConfig = ForksConfig()
    branch_deployment: BranchDeployment | None = None

    @model_validator(mode="after")
    def _unique_lakes(self) -> DponeConfig:
        names = [lake.name for lake in self.lakes]
        if len(names) != len(set(names)):
            raise ValueError("lake names must be unique")
        return self

    def project_path(self, path: str | Path) -> Path:
        """`path` as configured: absolute as it is, relative to the project root otherwise."""
        path = Path(path)
        return path if path.is_absolute() else self.project_root / path

    def project_location(self, location: str) -> str:
        """A configured location: `s3://` addresses as they are, local directories via `project_path`."""
        return location if location.startswith("s3://") else str(self.project_path(location))

    @property
    def state_path(self) -> Path:
        return self.project_path(self.state_dir)

    @property
    def dbt_project_path(self) -> Path:
        """The configured dbt project folder; `config.dbt_project_unset` naming the setting when none is."""
        if self.dbt_project_dir is None:
            raise ConfigError(
                "no dbt project is configured: set `dbt_project_dir` in dpone.yaml (or [tool.dpone]) to "
                "your dbt project's folder, relative to the project root",
                code="config.dbt_project_unset",
            )
        return self.project_path(self.dbt_project_dir)

    @property
    def control_store(self) -> str:
        return self.control_store_url or f"sqlite:///{self.control_store_file}"

    @property
    def control_store_file(self) -> Path:
        """The embedded control store: `<state>/control/control.sqlite`, a folder of its own that a
        fork's confined processes may write without the lakes beside it (`dpone_dagster.confinement`).
        A state dir that already holds `<state>/control.sqlite` (made before the folder) keeps it."""
        legacy = self.state_path / "control.sqlite"
        return legacy if legacy.exists() else self.state_path / "control" / "control.sqlite"

    def lake(self, name: str = DEFAULT_LAKE) -> LakeConfig:
        for lake in self.all_lakes:
            if lake.name == name:
                return lake
        raise ConfigError(f"no lake named {name!r} is configured", code="config.unknown_lake")

    @property
    def all_lakes(self) -> tuple[LakeConfig, ...]:
        """Configured lakes; the embedded `main` lake is added when none is named `main`."""
        if any(lake.name == DEFAULT_LAKE for lake in self.lakes):
            return self.lakes
        return (self.embedded_main_lake(), *self.lakes)

    def embedded_main_lake(self) -> LakeConfig:
        lakes = self.state_path / "lakes"
        return LakeConfig(
            name=DEFAULT_LAKE,
            catalog=str(lakes / "main.ducklake"),
            data_path=str(lakes / "storage" / "main") + "/",
            attach_args={"DATA_INLINING_ROW_LIMIT": 0},
        )


class ProjectRootMissingError(ConfigError):
    code = "config.project_root_missing"


PYPROJECT_FILE_NAME = "pyproject.toml"
PYPROJECT_TABLE = "tool.dpone"


def _has_dpone_table(pyproject: Path) -> bool:
    return pyproject.is_file() and _pyproject_table(pyproject) is not None


def _pyproject_table(pyproject: Path) -> dict | None:
    try:
        document = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    table = document.get("tool", {}).get("dpone") if isinstance(document.get("tool"), dict) else None
    return table if isinstance(table, dict) else None


def find_project_root(env: Mapping[str, str], cwd: Path) -> Path:
    """The project root: `DPONE_PROJECT_ROOT`, else the nearest folder at or above `cwd` holding
    `dpone.yaml` or a pyproject.toml with a `[tool.dpone]` table, else the folder of the file
    `DPONE_CONFIG` names. Never implicit: with none of them, `config.project_root_missing`."""
    if env.get("DPONE_PROJECT_ROOT"):
        return Path(env["DPONE_PROJECT_ROOT"]).resolve()
    here = cwd.resolve()
    for candidate in (here, *here.parents):
        if (candidate / CONFIG_FILE_NAME).is_file() or _has_dpone_table(candidate / PYPROJECT_FILE_NAME):
            return candidate
    if env.get("DPONE_CONFIG"):
        return Path(env["DPONE_CONFIG"]).resolve().parent
    raise ProjectRootMissingError(
        "no dpone project here: run `dpone init` in your dbt project, or write a dpone.yaml at its root, "
        "or add a [tool.dpone] table to its pyproject.toml, or set DPONE_PROJECT_ROOT to its folder "
        "(searched upward from the working directory, as git does)"
    )


def _apply_lake_overrides(lakes: list[dict], env: Mapping[str, str]) -> list[dict]:
    by_name = {str(lake.get("name")): lake for lake in lakes}
    for key, value in env.items():
        match = re.match(r"^DPONE_LAKE_([A-Z0-9_]+?)_(CATALOG|DATA_PATH)$", key)
        if not match:
            continue
        name = match.group(1).lower()
        field = match.group(2).lower()
        lake = by_name.get(name)
        if lake is None:
            raise ConfigError(
                f"{key} overrides lake {name!r}, which dpone.yaml does not define",
                code="config.unknown_lake",
            )
        lake[field] = value
    return lakes


def load_config(env: Mapping[str, str] | None = None) -> DponeConfig:
    """Read dpone.yaml (if any) and apply environment overrides. Cached per environment snapshot."""
    env = dict(os.environ if env is None else env)
    keys = (
        "DPONE_PROJECT_ROOT",
        "DPONE_CONFIG",
        "DPONE_STATE_DIR",
        "DPONE_CONTROL_STORE_URL",
        "DPONE_WORKSPACE",
        "DPONE_RELEASE_SOURCE_COMMIT",
        *BRANCH_DEPLOYMENT_ENV,
    )
    lake_keys = tuple(sorted((k, v) for k, v in env.items() if k.startswith("DPONE_LAKE_")))
    return _load_config(tuple((k, env.get(k)) for k in keys), lake_keys, str(Path.cwd()))


@lru_cache(maxsize=32)
def _load_config(
    keys: tuple[tuple[str, str | None], ...],
    lake_keys: tuple[tuple[str, str], ...],
    cwd: str,
) -> DponeConfig:
    env = {k: v for k, v in keys if v is not None}
    env.update(dict(lake_keys))
    root = find_project_root(env, Path(cwd))
    path = Path(env["DPONE_CONFIG"]) if env.get("DPONE_CONFIG") else root / CONFIG_FILE_NAME
    raw: dict = {}
    pyproject_table = None if path.is_file() else _pyproject_table(root / PYPROJECT_FILE_NAME)
    if pyproject_table is not None and not env.get("DPONE_CONFIG"):
        raw = dict(pyproject_table)
    elif path.is_file():
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path.name} is not valid YAML (line {_yaml_line(exc)})") from None
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path.name} must be a mapping at the top level")
        raw = dict(loaded or {})
    elif env.get("DPONE_CONFIG"):
        raise ConfigError("DPONE_CONFIG names a file that does not exist", code="config.missing")
    raw["project_root"] = root
    if env.get("DPONE_STATE_DIR"):
        raw["state_dir"] = env["DPONE_STATE_DIR"]
    if env.get("DPONE_CONTROL_STORE_URL"):
        raw["control_store_url"] = env["DPONE_CONTROL_STORE_URL"]
    if env.get("DPONE_WORKSPACE"):
        raw["workspace"] = env["DPONE_WORKSPACE"]
    _apply_branch_deployment(raw, env)
    raw["lakes"] = _apply_lake_overrides([dict(x) for x in raw.get("lakes") or []], env)
    if env.get("DPONE_RELEASE_SOURCE_COMMIT"):
        if not isinstance(raw.get("release"), dict):
            raise ConfigError(
                "DPONE_RELEASE_SOURCE_COMMIT is set, but dpone.yaml has no release: section to apply it to",
                code="config.release_missing",
            )
        raw["release"] = {**raw["release"], "source_commit": env["DPONE_RELEASE_SOURCE_COMMIT"]}
    try:
        return DponeConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors())
        raise ConfigError(f"invalid configuration: {problems}") from None


def _apply_branch_deployment(raw: dict, env: Mapping[str, str]) -> None:
    """In a Dagster+ branch deployment the workspace is the branch's (or pull request's) fork."""
    if env.get("DAGSTER_CLOUD_IS_BRANCH_DEPLOYMENT", "").strip().lower() not in ("1", "true"):
        return
    branch = BranchDeployment(
        branch=env.get("DAGSTER_CLOUD_GIT_BRANCH") or None,
        pull_request_id=env.get("DAGSTER_CLOUD_PULL_REQUEST_ID") or None,
        pull_request_status=env.get("DAGSTER_CLOUD_PULL_REQUEST_STATUS") or None,
    )
    try:
        fork = branch.fork_id
    except DponeError as exc:
        raise ConfigError(
            f"a branch deployment needs DAGSTER_CLOUD_GIT_BRANCH or DAGSTER_CLOUD_PULL_REQUEST_ID: {exc}",
            code="config.branch_unidentified",
        ) from None
    if env.get("DPONE_WORKSPACE") and env["DPONE_WORKSPACE"] != fork:
        raise ConfigError(
            f"this branch deployment's workspace is {fork!r}, but DPONE_WORKSPACE names another one",
            code="config.branch_workspace_conflict",
        )
    raw["branch_deployment"] = branch.model_dump()
    raw["workspace"] = fork


def _yaml_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return str(mark.line + 1) if mark is not None else "?"


class SecretMissingError(ConfigError):
    code = "config.secret_missing"


def resolve_secret(env_name: str, env: Mapping[str, str] | None = None) -> str:
    """Read a credential referenced by environment-variable name, at the moment of use."""
    source = os.environ if env is None else env
    value = source.get(env_name)
    if not value:
        raise SecretMissingError(f"environment variable {env_name} (a credential reference) is not set")
    return value
