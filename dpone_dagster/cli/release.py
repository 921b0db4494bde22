"""`dpone release show PATH` and `dpone release verify PATH`: read-only inspection of development releases.

PATH is one of:
- an installed deployment directory (`<cache>/deployments/<hex>`, holding `deployment.json`);
- a commit object of a local registry (`<registry>/releases/<hex>.json`);
- a commit object of an S3 registry (`s3://bucket/prefix/releases/<hex>.json`), read with the
  configured release platform's `storage` (credentials by env-var name), or with boto3's default
  credential chain when no release platform is configured;
- a directory of release members with `release.json` at its top (an exported bundle).

Both commands re-verify every byte (`open_bundle`) and write nothing. There is deliberately no
command that publishes, installs, activates or admits: those run only through the Dagster assets
with the platform-adapter resources, and nothing read here (embedded grant digests, deployment
records) is ever treated as authority.

`dpone release recover|repair-audit|rollback|gc [--dry-run] [--json]` and
`dpone release break-lease LEASE_ID [--dry-run] [--force] [--json]` are the operator operations
(`dpone_dagster.release.delivery.operations`) over the configured release platform, built by the one
composition the `release_*_job` jobs use too (`dpone_dagster.release.services.compose_release_services`):
authority comes from the authority location and the protected target, never from a flag or a file
named on the command line. Each prints what it did (`action`), the
receipt it ran under, and exits 1 with `refused: [code] message` on a typed refusal.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import typer

from dpone_dagster.config import load_config
from dpone_dagster.errors import DponeError
from dpone_dagster.release.inspection import Inspected, inspect_release, release_summary

app = typer.Typer(no_args_is_help=True, add_completion=False)


def _open_or_exit(path: str) -> Inspected:
    try:
        release = load_config().release if path.startswith("s3://") else None
        return inspect_release(path, storage=release.storage if release else None)
    except DponeError as error:
        if error.code == "release.not_a_release_location":  # a usage error: exit 2, as typer's own
            raise typer.BadParameter(f"[{error.code}] {error.message}", param_hint="PATH") from None
        typer.echo(f"refused: [{error.code}] {error.message}", err=True)
        raise typer.Exit(code=1) from None


@app.command("show")
def show(path: str, as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Show a published or installed development release (re-verified, read-only)."""
    data = release_summary(_open_or_exit(path), datetime.now(UTC))
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    for key, value in data.items():
        typer.echo(f"{key:24} {json.dumps(value) if isinstance(value, (dict, list)) else value}")


@app.command("verify")
def verify(path: str) -> None:
    """Re-verify every byte of a published or installed release; exit 1 with the error code if any differs."""
    inspected = _open_or_exit(path)
    typer.echo(
        f"verified {inspected.kind} release {inspected.bundle.release_id} ({len(inspected.bundle.members)} members)"
    )


# -- operator operations ------------------------------------------------------------------------


def _operations():
    """The operations service over the configured release platform, composed as the jobs compose it."""
    from dpone_dagster.release.platform.settings import release_settings
    from dpone_dagster.release.services import ReleasePlatform, compose_release_services

    return compose_release_services(ReleasePlatform.from_settings(release_settings(load_config()))).operations


def _operate(method: str, *args: str, dry_run: bool, as_json: bool, **options: bool) -> None:
    try:
        outcome = getattr(_operations(), method)(*args, dry_run=dry_run, **options)
    except DponeError as error:
        if as_json:
            typer.echo(json.dumps({"refused": error.code, "message": error.message}, sort_keys=True))
        else:
            typer.echo(f"refused: [{error.code}] {error.message}", err=True)
        raise typer.Exit(code=1) from None
    data = outcome.as_dict()
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    for key, value in data.items():
        typer.echo(f"{key:24} {json.dumps(value) if isinstance(value, (dict, list)) else value}")


JSON = typer.Option(False, "--json", help="Print one JSON object.")
DRY_RUN = typer.Option(False, "--dry-run", help="Check and plan only; verify no grant and write nothing.")


@app.command("recover")
def recover(dry_run: bool = DRY_RUN, as_json: bool = JSON) -> None:
    """Complete an activation that stopped after preparation (`pointer_recovery` receipt)."""
    _operate("recover", dry_run=dry_run, as_json=as_json)


@app.command("repair-audit")
def repair_audit(dry_run: bool = DRY_RUN, as_json: bool = JSON) -> None:
    """Append the audit entry the active deployment lacks (`audit_repair` receipt)."""
    _operate("repair_audit", dry_run=dry_run, as_json=as_json)


@app.command("rollback")
def rollback(dry_run: bool = DRY_RUN, as_json: bool = JSON) -> None:
    """Make the previous immutable deployment active again (`rollback` receipt)."""
    _operate("rollback", dry_run=dry_run, as_json=as_json)


@app.command("gc")
def gc(dry_run: bool = DRY_RUN, as_json: bool = JSON) -> None:
    """Remove unreferenced registry blobs and abandoned staging (cleanup receipt; never during a publication)."""
    _operate("gc", dry_run=dry_run, as_json=as_json)


@app.command("break-lease")
def break_lease(
    lease_id: str,
    dry_run: bool = DRY_RUN,
    force: bool = typer.Option(
        False, "--force", help="Break an expired lease whose holder cannot be seen from this host."
    ),
    as_json: bool = JSON,
) -> None:
    """Break a registry lease a killed publish or install left (holder provably gone; run --dry-run first)."""
    _operate("break_lease", lease_id, dry_run=dry_run, as_json=as_json, force=force)
