"""Where the release surface finds its inputs and puts its outputs, derived from the one configuration.

`release_settings(config)` answers, for the release group and the dormant deployment location:
where the authority documents are (a directory or an `s3://bucket/prefix`), where the protected
target configuration is (pinned policy digest, environment, tier, revocation epoch), where the
source repository, the release registry and the local release cache live, and where the runtime
access ledger is written.

- A `release:` section in the configuration (`ReleaseConfig`) is a configured platform
  (`synthetic=False`): its locations as configured, relative paths under the project root. Nothing
  synthetic is ever created or renewed; missing authority documents or a missing protected target
  stop the run with their codes.
- Without it, every location is under the state directory and the authority is synthetic
  (`synthetic=True`), created on first use; the source is `dbt_project_synthetic/` under the
  synthetic repository name and commit.

The runtime access ledger, the acceptance reports of the rollout gate and the control store are
under the state directory in both cases. Only the embedded default has a `synthetic_runtime_root`:
the directory of the executable synthetic-family release and the lake its tasks write (a configured
platform never gets one, so nothing synthetic ever executes there). The standard runtime resolves a
connection alias's credential from the environment variable `connection_env[alias]`, by default
`DPONE_CONNECTION_<ALIAS>`.

What a reader could get wrong: the protected target file is *not* the authority location. Grants
and policies may be dropped into the authority location by anyone who can write there; they are
only believed after verification against the digest pinned in the protected file, which only the
platform writes. The embedded default writes both (synthetic), which is exactly why it is marked
synthetic everywhere it shows.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dpone_dagster.authority.synthetic import SYNTHETIC_COMMIT, SYNTHETIC_REPOSITORY
from dpone_dagster.config import DponeConfig, StorageConfig

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}$")


class ReleaseSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    authority_location: str
    registry_location: str
    cache_root: Path
    protected_target_file: Path
    source_location: Path
    source_repository: str
    source_commit: str
    access_ledger: Path
    control_store_url: str
    acceptance_dir: Path
    storage: StorageConfig | None = None
    synthetic: bool = True
    synthetic_runtime_root: Path | None = None
    connection_env: dict[str, str] = Field(default_factory=dict)

    @field_validator("connection_env")
    @classmethod
    def _env_names_only(cls, value: dict[str, str]) -> dict[str, str]:
        if any(not _ENV_NAME.match(name) for name in value.values()):
            raise ValueError("connection_env maps an alias to the NAME of an environment variable, not a value")
        return value

    @model_validator(mode="after")
    def _synthetic_is_local(self) -> ReleaseSettings:
        if self.synthetic and self.authority_is_s3:
            raise ValueError("the synthetic embedded default signs into a local directory, never into S3")
        return self

    @property
    def runs_synthetic_runtime(self) -> bool:
        """Only the synthetic embedded default installs and runs the executable synthetic-family release."""
        return self.synthetic and self.synthetic_runtime_root is not None

    def connection_env_name(self, alias: str) -> str:
        """The environment variable holding the credential of connection `alias`."""
        return self.connection_env.get(alias) or f"DPONE_CONNECTION_{alias.upper()}"

    @property
    def registry_is_s3(self) -> bool:
        return self.registry_location.startswith("s3://")

    @property
    def authority_is_s3(self) -> bool:
        return self.authority_location.startswith("s3://")


def release_settings(config: DponeConfig) -> ReleaseSettings:
    """The configured release platform, or the synthetic embedded default when none is configured."""
    state = config.state_path / "release"
    platform = config.release
    if platform is not None:
        return ReleaseSettings(
            authority_location=config.project_location(platform.authority_location),
            registry_location=config.project_location(platform.registry_location),
            cache_root=config.project_path(platform.cache_root),
            protected_target_file=config.project_path(platform.protected_target_file),
            source_location=config.project_path(platform.source_location),
            source_repository=platform.source_repository,
            source_commit=platform.source_commit,
            access_ledger=state / "runtime_access.jsonl",
            acceptance_dir=state / "acceptance",
            control_store_url=config.control_store,
            storage=platform.storage,
            synthetic=False,
        )
    return ReleaseSettings(
        authority_location=str(state / "authority"),
        registry_location=str(state / "registry"),
        cache_root=state / "cache",
        protected_target_file=state / "protected" / "target.json",
        source_location=config.dbt_project_path,
        source_repository=SYNTHETIC_REPOSITORY,
        source_commit=SYNTHETIC_COMMIT,
        access_ledger=state / "runtime_access.jsonl",
        acceptance_dir=state / "acceptance",
        control_store_url=config.control_store,
        synthetic=True,
        synthetic_runtime_root=state / "synthetic_runtime",
    )
