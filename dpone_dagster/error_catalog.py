"""The catalogue of every error code: what it means to an operator, and which class declares it.

A code gets its one-line operator meaning in exactly one place. A class that declares a closed set
(`codes = {code: meaning}`, `contracts.coded.CodedError`) carries the meanings itself; give a new
error class such a mapping. `MEANINGS` below holds the rest: the codes of one-class-per-code errors
(`class TrackingError(LakeError): code = "lake.tracking_invalid"`), codes given at a raise
(`ConfigError(message, code="config.missing")`), code sets written as enums (runtime admission's
denial reasons) and codes a report records instead of raising (`lake.role_drop_failed`).
`docs/errors.md` is generated from this catalogue by `python -m devtools.error_table --write`.

What a reader could get wrong: `catalog()` sees the classes of the modules imported so far; the
generator and the test import every module first (`devtools.error_sources.import_every_module`)
and scan the source, so a code raised anywhere without a meaning here or on its class fails the
test. Codes are never renamed once released: operators alert on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dpone_dagster.errors import DponeError, declared_codes

MEANINGS: Mapping[str, str] = {
    "admission.authority_expired": (
        "The release's development authority has expired; the standard runtime starts no new attempt of its tasks."
    ),
    "admission.authority_revoked": (
        "The release's development authority was revoked (the revocation epoch moved on); its tasks are denied."
    ),
    "admission.development_dormant": (
        "A development release is delivered dormant: the standard runtime executes none of its tasks, by design."
    ),
    "admission.synthetic_admitted": (
        "Not a refusal: a synthetic-family task was admitted on a target the platform declared synthetic."
    ),
    "admission.synthetic_target_required": (
        "A synthetic-family task runs only on a target the platform declared synthetic; it was denied here."
    ),
    "admission.task_shape_invalid": (
        "A pre-hook task must keep publish_xcom=false and name its hook; the task as asked was denied."
    ),
    "admission.unknown_family": (
        "The installed release belongs to no family the standard runtime knows; every task is denied."
    ),
    "admission.unknown_task": "The task is not a member of the installed release; it was denied.",
    "admission.view_unauthenticated": (
        "The release view handed to admission was not made from a verified release in "
        "this process (built by hand, or changed after); every task is denied."
    ),
    "config.dbt_project_unset": (
        "No dbt project is configured: set dbt_project_dir in dpone.yaml (or [tool.dpone]); it has no default."
    ),
    "config.branch_unidentified": (
        "A branch deployment has neither DAGSTER_CLOUD_GIT_BRANCH nor "
        "DAGSTER_CLOUD_PULL_REQUEST_ID, so its fork cannot be named."
    ),
    "config.branch_workspace_conflict": (
        "A branch deployment's workspace is its own branch fork, but DPONE_WORKSPACE names another; unset one."
    ),
    "config.invalid": (
        "dpone.yaml or an environment override is invalid (not YAML, not a mapping, or a setting out "
        "of range); the message names it."
    ),
    "config.invalid_duration": (
        "A duration setting is not a positive whole number followed by s, m, h, d or w (e.g. 7d)."
    ),
    "config.location_unloadable": (
        "The code location module named for the CLI cannot be imported or holds no Dagster definitions."
    ),
    "config.location_unspecified": (
        "`dpone dev` found nothing to serve: pass -m MODULE or -w WORKSPACE_FILE, keep a "
        "workspace.yaml at the project root, or make it a dg project."
    ),
    "config.missing": "DPONE_CONFIG names a configuration file that does not exist.",
    "config.port_busy": (
        "The port given to `dpone dev --port` is in use; pick another or leave --port out for a free one."
    ),
    "config.project_root_missing": (
        "No project root: no dpone.yaml or pyproject.toml [tool.dpone] at or above the "
        "working directory and no DPONE_PROJECT_ROOT; run `dpone init` or set one of them."
    ),
    "config.release_missing": (
        "DPONE_RELEASE_SOURCE_COMMIT is set, but dpone.yaml has no release: section to apply it to."
    ),
    "config.secret_missing": "An environment variable that a credential reference names is not set in this process.",
    "config.synthetic_authority_misplaced": (
        "The synthetic bootstrap signs only into the embedded default's local "
        "directory; the release settings point elsewhere."
    ),
    "config.unknown_lake": "A lake name (in a command or an environment override) is not defined in dpone.yaml.",
    "confinement.failed": (
        "Landlock is available, but the confinement ruleset could not be built or applied; nothing was restricted."
    ),
    "confinement.command_not_found": (
        "The launcher was asked to run a command it cannot find on PATH or in the venv; nothing was started."
    ),
    "confinement.unavailable": (
        "The kernel offers no Landlock (macOS, Linux before 5.13, or a container blocking "
        "it); a fork's processes run unconfined."
    ),
    "confinement.cannot_confine": (
        "The configuration puts something a fork must write where a parent's files are, so the fork cannot be confined."
    ),
    "confinement.fork_catalog_beside_parent": (
        "The fork's catalog was made in its parent's folder, so the kernel "
        "cannot let the fork write it alone; recreate the fork."
    ),
    "confinement.required": (
        "forks.require_confinement is set and this process acts for a fork unconfined; start it "
        "through the launcher or `dpone dev`."
    ),
    "confinement.unconfined": (
        "Warned once, not raised: a process acts for a fork without kernel confinement; only "
        "the SQL guard protects the parent."
    ),
    "confinement.unsafe_temp_dir": (
        "The fork's private temp folder exists but is not a folder owned by this user alone; remove it and start again."
    ),
    "confinement.writable_covers_parent": (
        "A folder a fork must write contains a parent lake's file or folder, which "
        "would become writable; give it its own folder."
    ),
    "control_store.unavailable": (
        "The control store (SQLite file or PostgreSQL) that holds workspaces and the ledger cannot be reached."
    ),
    "dbt.lake_mismatch": (
        "The dbt translator keys assets in a different lake than the factory builds; give both the same lake."
    ),
    "dbt.no_assets": "There are no dbt assets to build definitions for; pass at least one dbt asset.",
    "dbt.parse_failed": "`dbt parse` failed for the project; run it in the project folder to see dbt's own error.",
    "dbt.parse_locked": (
        "Another process has held the dbt manifest lock for over five minutes; check for a stuck parse."
    ),
    "dbt.partition_column_missing": "A model tagged as partitioned declares no meta.dpone.partition_by column.",
    "dbt.profile_not_fork_aware": (
        "The dbt profile target is not `type: duckdb` with the lake's alias as database "
        "and the dpone plugin; dbt would write elsewhere."
    ),
    "dbt.profile_unreadable": "The dbt project's profiles.yml could not be read.",
    "dbt.project_ambiguous": "Both or neither of `project_dir` and `project` were given; give exactly one.",
    "dbt.project_error": (
        "The dbt project cannot be prepared (e.g. no `dbt` executable); the message says what is missing."
    ),
    "dbt.project_missing": (
        "The configured dbt project folder has no dbt_project.yml; point dbt_project_dir at the project."
    ),
    "demo.checks_failed": "`dpone demo` ran, but some dbt tests failed; see the listed checks.",
    "demo.materialization_failed": "The demo's dbt materialization run failed; see `make dev` or the log above.",
    "deployment.integrity_failed": (
        "The active installed release failed integrity verification and was not loaded; "
        "re-install it from the registry."
    ),
    "dpone.error": "A refusal with no more specific code; the message says what was refused.",
    "fork.diff_key_invalid": "A diff key column is not on both sides of the table; pass key columns both sides have.",
    "fork.diff_key_not_unique": "The diff key is not unique on one side, so rows cannot be paired; pass another --key.",
    "fork.diff_mismatch": (
        "The fork's diff changed since the reviewed one (the fork changed); diff again and review before promoting."
    ),
    "fork.diff_not_fork_materialized": (
        "A table to diff was not materialized by the fork itself (it is deferred or absent); nothing to compare."
    ),
    "fork.diff_not_in_fork": (
        "A fork's diff runs in the fork's own process (DPONE_WORKSPACE=<fork>); this process "
        "acts for another workspace."
    ),
    "fork.diff_owner_unreachable": (
        "The lake of the ancestor owning a compared table is not attached, so it cannot be diffed."
    ),
    "fork.diff_unknown": (
        "No recorded diff with that id for this fork (or it is of an earlier incarnation); run "
        "`dpone fork diff` and review it."
    ),
    "fork.not_isolated": (
        "The lake is not an isolated fork lake of that workspace (it is shared or the root's); "
        "there is nothing to diff or promote."
    ),
    "fork.promotion_conflict": (
        "The parent changed since the reviewed diff; nothing was written. Rebuild or diff again."
    ),
    "fork.promotion_no_tables": "A promotion names no table; name at least one.",
    "fork.promotion_not_in_diff": (
        "The reviewed diff does not cover every table named for promotion; diff those tables too."
    ),
    "fork.promotion_not_parent": (
        "Promotion runs in the parent's deployment (as its writer); this process acts for another workspace."
    ),
    "init.config_conflict": (
        "`dpone init` found a dpone.yaml naming another dbt project (dbt_project_dir); nothing was written."
    ),
    "init.dbt_project_missing": (
        "`dpone init` found no single dbt project here (two folders deep); name it with --dbt-project."
    ),
    "init.profile_unsupported": (
        "`dpone init` refused the dbt profile: not dbt-duckdb, no outputs for the project's "
        "profile, or a non-DuckLake ATTACH it cannot convert."
    ),
    "init.profiles_missing": "`dpone init` needs profiles.yml beside dbt_project.yml (dpone reads the profile there).",
    "init.refused": "`dpone init` refused to change the project; the message says why.",
    "init.unreadable": "`dpone init` could not read dbt_project.yml, profiles.yml or dpone.yaml as a YAML mapping.",
    "lake.alias_attached_elsewhere": (
        "This connection already has the lake's alias attached to another place; detach it or use a fresh connection."
    ),
    "lake.ancestor_maintenance": (
        "DuckLake maintenance or CHECKPOINT on an ancestor's lake (or a refused maintenance "
        "form) was refused by the SQL guard."
    ),
    "lake.attach_failed": "A statement attaching a lake or its credentials failed; the statement is shown redacted.",
    "lake.catalog_busy": (
        "The fork's DuckDB catalog file is attached by a running connection; it is dropped by a later cleanup."
    ),
    "lake.catalog_unreachable": "A PostgreSQL lake catalog cannot be reached.",
    "lake.cleanup_failed": (
        "Recorded in a cleanup report, not raised: a fork namespace's cleanup stopped; its ledger "
        "row stays for the next drop."
    ),
    "lake.cleanup_outside_namespace": (
        "DuckLake maintenance of this lake would delete a file outside its own data "
        "path (or its file lists cannot be read); refused."
    ),
    "lake.data_path_drift": (
        "The lake's data path setting changed after the fork was created; the fork refuses to attach (recreate it)."
    ),
    "lake.dbt_duckdb_unsupported": (
        "The installed dbt-duckdb is outside the range the dbt SQL guard was reviewed for "
        "(pyproject's dbt-duckdb range); install a supported release."
    ),
    "lake.dbt_guard_unavailable": (
        "dbt-duckdb's cursor path is not where the reviewed releases have it (or a remote "
        "environment), so dbt's SQL cannot be guarded; dbt refuses to start."
    ),
    "lake.dbt_recording_failed": (
        "A dbt run typed in a terminal built its tables but recording them in the control "
        "store failed at the dbt process's exit (printed as `dpone: [code] ...`, exit 2); "
        "run the same build again, or through Dagster, to record them."
    ),
    "lake.dbt_profile_mismatch": (
        "The dbt profile's database is not the alias the lake is attached as; set `database:` to that alias."
    ),
    "lake.ducklake_assets_unknown": (
        "No code location is known here, so its DuckLake assets cannot be listed; pass the asset keys."
    ),
    "lake.dynamic_sql": (
        "SQL passed as a string to a function (query(), postgres_execute(), ...) cannot be checked; "
        "the SQL guard refuses it."
    ),
    "lake.error": "A DuckLake could not be resolved, attached or written safely; the message says which lake and why.",
    "lake.extension_missing": (
        "A DuckDB extension the project ships is not installed for this DuckDB version (or is not one it ships)."
    ),
    "lake.extension_statement": (
        "LOAD, INSTALL or UPDATE EXTENSIONS in user SQL; extensions are loaded by the project only."
    ),
    "lake.file_write_outside_namespace": (
        "User SQL would write a file outside the lake's own data path (a fork's own "
        "prefix) or the temp folder; refused."
    ),
    "lake.foreign_database": (
        "User SQL would open a database or catalog file (or this lake's own catalog files) by path; refused."
    ),
    "lake.fork_role_key_mismatch": (
        "Stored fork role passwords cannot be read: no fork role key here, not a Fernet "
        "key, or sealed under another key; re-provision."
    ),
    "lake.fork_role_key_unsafe": "The fork role key file is readable by other users; make it 0600.",
    "lake.fork_roles_missing": (
        "The fork's PostgreSQL catalog roles are not provisioned (or lack their password) and "
        "the admin credential is absent here."
    ),
    "lake.fork_unsupported_catalog": (
        "The lake's catalog kind cannot hold a fork namespace; the fork refuses to run "
        "rather than write the parent's catalog."
    ),
    "lake.guarded_connection_method": (
        "A method of the guarded DuckDB connection or relation that was not reviewed "
        "for SQL (or modifying the guard) was refused."
    ),
    "lake.guarded_setting": (
        "SET/RESET/PRAGMA of a setting fixed for this connection (extensions, external access, "
        "secrets, ...) was refused."
    ),
    "lake.invalid_attach_option": "An ATTACH option in the lake's settings is not a plain name with a supported value.",
    "lake.invalid_data_path": (
        "A lake's data path is not a folder URL below some parent (a bucket or filesystem root cannot be forked)."
    ),
    "lake.invalid_read": (
        "A read set is malformed: a table name contains a comma, or the dbt plugin was given both a read "
        "set and `DPONE_DBT_READS_FROM_INVOCATION`."
    ),
    "lake.invalid_target": (
        "A target table name is not `table` or `schema.table` (or a single string was given for a list)."
    ),
    "lake.live_views_unreadable": (
        "The live defer views of a fork catalog cannot be read from its metadata catalog; "
        "check the DuckLake extension and catalog."
    ),
    "lake.maintain_fork_file_listed": (
        "DuckLake listed a fork's file (or a file outside this lake's data path) for deletion; nothing was deleted."
    ),
    "lake.maintain_forks_under_data_path": (
        "This lake's data path contains (or lies in) a forks root, so maintenance "
        "would treat fork files as orphans; refused."
    ),
    "lake.maintain_not_root": "Lake maintenance runs only as the root's own writer; this process acts for a fork.",
    "lake.maintain_pins_unavailable": "The fork pins cannot be read, so no snapshot is expired by maintenance.",
    "lake.metadata_write": (
        "User SQL would write a DuckLake metadata catalog; only DuckLake writes it, user SQL may only query it."
    ),
    "lake.partition_tracking_invalid": (
        "A table's partition tracking rows are inconsistent (different partition "
        "columns, or no owner to read); rebuild the table."
    ),
    "lake.pin_not_a_fork": "The lake is not a fork lake of that workspace; only fork lakes are pinned.",
    "lake.pin_unavailable": (
        "The fork's ancestors could not be pinned; its pins are unchanged (it reads live until a repin succeeds)."
    ),
    "lake.prefix_not_empty": (
        "Objects appeared under a fork's data prefix while it was swept; the ledger row stays for the next drop."
    ),
    "lake.reserved_option": (
        "A lake's attach_args set an option the project sets itself (DATA_PATH); use the lake's own setting."
    ),
    "lake.role_drop_failed": (
        "Recorded in a role leftover, not raised: dropping a fork's catalog schema or roles "
        "stopped; it is retried by the next drop."
    ),
    "lake.role_fence_failed": (
        "Recorded in a role leftover, not raised: fencing a fork's catalog roles stopped; it "
        "is retried by the next drop."
    ),
    "lake.role_provisioning_failed": (
        "A fork's PostgreSQL roles could not be provisioned or dropped (catalog "
        "unreachable as admin, or not a fork namespace)."
    ),
    "lake.sql_failed": (
        "DuckDB refused the SQL given to `dpone lake sql` after the guard admitted it; the message has DuckDB's reason."
    ),
    "lake.sql_refused": "The SQL guard refused a statement; the specific lake.* code of the refusal says which rule.",
    "lake.sql_unparsable": (
        "The SQL cannot be parsed by DuckDB's own parser (or is not SQL text); the guard refuses what it cannot read."
    ),
    "lake.storage_unreachable": "Object storage could not be listed or refused a delete; nothing was dropped.",
    "lake.tracking_invalid": (
        "A fork's table-state tracking input is invalid (status, names or columns); the message names it."
    ),
    "lake.unmanaged_attach": (
        "ATTACH or DETACH in user SQL; lakes are attached only through the workspace's resolution."
    ),
    "lake.unmanaged_use": (
        "USE of an ancestor or of a DuckLake metadata catalog; ancestors are read through defer views."
    ),
    "lake.unsafe_ledger_row": (
        "A ledger row names a data path or namespace outside its fork's own; cleanup refuses to touch it."
    ),
    "lake.unsafe_namespace": (
        "Refused to create or drop a namespace that is not a fork namespace (or a catalog kind forks never write)."
    ),
    "lake.unsafe_prefix": (
        "Refused to delete outside a fork's data prefix, or from storage other than s3:// and local paths."
    ),
    "lake.unsupported_catalog": (
        "The lake's catalog kind does not support what was asked (e.g. sibling catalog files of a non-DuckDB catalog)."
    ),
    "lake.unsupported_statement": "A statement type off the SQL guard's list (IMPORT DATABASE included) was refused.",
    "release.run_failed": "The release job did not install a release; the refusal's own code is carried when known.",
    "workspace.branch_parent_mismatch": (
        "The branch fork exists with another parent than the configured one; drop it or set the parent."
    ),
    "workspace.chain_too_deep": "Forks nest only to a fixed depth; this fork would be deeper.",
    "workspace.dagster_home_of_another_workspace": (
        "DAGSTER_HOME is another workspace's Dagster instance; its UI would show that workspace's runs."
    ),
    "workspace.dev_workspaces_attached": (
        "Standing dev workspaces are attached to this workspace; drop or re-home them first."
    ),
    "workspace.dropping": (
        "The workspace is being dropped (or was re-created) and takes no new resolutions or runs; resolve again."
    ),
    "workspace.error": "A workspace operation was refused; the message says which and why.",
    "workspace.executor_unbindable": (
        "An executor without a creation function cannot be bound to the deployment's workspace."
    ),
    "workspace.exists": "A workspace with this id already exists.",
    "workspace.git_branch_unknown": (
        "HEAD is detached, so no branch names the fork; check out a branch or name the fork with `dpone fork create`."
    ),
    "workspace.invalid_id": (
        "A workspace id is not git-branch-safe (or a branch fork has neither branch nor pull request)."
    ),
    "workspace.in_use": (
        "The fork's own `dpone dev` (webserver, daemon, code servers) still runs on its Dagster "
        "home; stop it, or drop with --stop."
    ),
    "workspace.invalid_ttl": "A fork's TTL is shorter than one minute.",
    "workspace.janitor_not_root": (
        "The TTL janitor drops forks only from the root's deployment (a dry run works anywhere)."
    ),
    "workspace.not_a_branch_deployment": (
        "Not a Dagster+ branch deployment; use --from-git for the branch checked out here."
    ),
    "workspace.not_a_git_checkout": (
        "This folder is not in a git checkout with a commit (or git cannot run); --from-git needs one."
    ),
    "workspace.not_this_deployment": (
        "A run or job asked for a workspace other than the one this deployment acts "
        "for; a run cannot choose its workspace."
    ),
    "workspace.owner_required": "A fork needs an owner.",
    "workspace.permission_denied": (
        "Only the workspace's owner or an admin may drop it, change its lakes or grant on it."
    ),
    "workspace.root_protected": "The root workspace cannot be created as a fork, dropped, or lose its lakes.",
    "workspace.shared_is_root": "A shared lake is always the root's; name the root explicitly (--shared-with <root>).",
    "workspace.unknown": "No workspace with this id exists (or the named parent does not).",
    "workspace.unknown_lake": "The workspace (or the parent) has no lake with this name.",
}


@dataclass(frozen=True)
class CatalogEntry:
    """One code: its operator meaning and the class that declares it (None for a code given at a raise)."""

    code: str
    meaning: str | None
    declared_by: type[DponeError] | None


def catalog(extra_codes: frozenset[str] | set[str] = frozenset()) -> dict[str, CatalogEntry]:
    """Every code declared by an imported class, in `MEANINGS`, or in `extra_codes`, sorted by code.

    `meaning` is None when neither the declaring class's `codes` nor `MEANINGS` gives one."""
    declared = declared_codes()
    entries = {}
    for code in sorted(set(declared) | set(MEANINGS) | set(extra_codes)):
        holder = declared.get(code)
        own = holder.__dict__.get("codes", {}).get(code) if holder is not None else None
        entries[code] = CatalogEntry(code, own if own is not None else MEANINGS.get(code), holder)
    return entries


def described_twice() -> list[str]:
    """Codes whose meaning is both on their class and in `MEANINGS` (each code has one meaning)."""
    return sorted(
        code
        for code, holder in declared_codes().items()
        if code in MEANINGS and code in holder.__dict__.get("codes", {})
    )
