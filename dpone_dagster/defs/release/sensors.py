"""Sensors of the release domain: new authority or source → a release run; revocation → blocked.

- `release_inputs_sensor` requests a `release_job` run when the signed grant in the authority
  location or the source (its repository commit and snapshot of files) differs from what the last
  requested run saw. Its cursor is that pair of identities; every skip says in words what it saw.
- `revocation_sensor` watches the revocation epoch of the protected target. When it moves, every
  release installed in the cache is blocked: its state-machine history records `blocked`, and an
  observation on `installed_release` shows the reason in the UI. Nothing is deleted: historical
  evidence stays readable.

What a reader could get wrong: neither sensor creates or changes authority; in the embedded default
the synthetic grant appears with the first `release_job` run, so until then the inputs sensor skips.
"""

import json

import dagster as dg
from dagster import SensorEvaluationContext

from dpone_dagster.clock import SystemClock
from dpone_dagster.contracts.identity import digest
from dpone_dagster.control.store import open_store
from dpone_dagster.defs.release.assets import installed_release
from dpone_dagster.defs.release.jobs import release_job
from dpone_dagster.errors import DponeError
from dpone_dagster.release.active import read_only_cache
from dpone_dagster.release.platform.settings import ReleaseSettings
from dpone_dagster.release.platform.target import AuthorityDocuments, ProtectedTarget, object_store
from dpone_dagster.release.source.snapshot import open_source
from dpone_dagster.release.state import ReleaseState, ReleaseStateMachine

GRANT_KIND = "dpone.development-authority.v1"


def _short(identity: str) -> str:
    return identity.removeprefix("sha256:")[:12]


def release_inputs(settings: ReleaseSettings) -> dict[str, str] | str:
    """The identities a release run is built from, or a sentence saying why there are none yet."""
    try:
        documents = AuthorityDocuments(object_store(settings.authority_location, settings.storage)).read()
        grant = digest(GRANT_KIND, documents.grant)
    except DponeError as error:
        return f"no readable signed grant in the authority location yet ({error.code})"
    try:
        with open_source(settings.source_location) as tree:
            snapshot = tree.snapshot.digest
    except DponeError as error:
        return f"the source cannot be read ({error.code})"
    return {"grant": grant, "commit": settings.source_commit, "snapshot": snapshot}


def build_release_inputs_sensor(settings: ReleaseSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name="release_inputs_sensor",
        job=release_job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Requests a release run when a new signed grant or a new source commit/snapshot appears. "
        "A skipped tick says why: the grant, commit and snapshot it saw are unchanged since the last "
        "requested run, or no readable signed grant is in the authority location yet (with its code).",
    )
    def release_inputs_sensor(context: SensorEvaluationContext):
        seen = release_inputs(settings)
        if isinstance(seen, str):
            return dg.SkipReason(seen)
        previous = json.loads(context.cursor) if context.cursor else None
        if previous == seen:
            return dg.SkipReason(
                f"grant {_short(seen['grant'])} and source {_short(seen['snapshot'])} at commit "
                f"{seen['commit'][:12]} are unchanged since the last requested release run"
            )
        changed = (
            "first look" if previous is None else ", ".join(k for k in seen if previous.get(k) != seen[k]) + " changed"
        )
        context.update_cursor(json.dumps(seen, sort_keys=True))
        return dg.RunRequest(
            run_key=f"grant-{_short(seen['grant'])}-source-{_short(seen['snapshot'])}-{seen['commit'][:12]}",
            tags={
                "dpone/trigger": changed,
                "dpone/grant_digest": seen["grant"],
                "dpone/source_snapshot": seen["snapshot"],
                "dpone/source_commit": seen["commit"],
            },
        )

    return release_inputs_sensor


def block_installed_releases(settings: ReleaseSettings, epoch: int) -> list[str]:
    """Record every installed release whose authority epoch is not `epoch` as blocked; return their ids."""
    protected = ProtectedTarget(settings.protected_target_file)
    clock = SystemClock()
    cache = read_only_cache(settings, protected.configuration().environment, clock)
    states = ReleaseStateMachine(open_store(settings.control_store_url), clock)
    blocked = []
    for release_id in cache.deployments():
        record = cache.load(release_id).record
        if record.revocation_epoch != epoch:
            states.note(release_id, ReleaseState.DENIED, "blocked", reason="authority.revoked", revocation_epoch=epoch)
            blocked.append(release_id)
    return blocked


def build_revocation_sensor(settings: ReleaseSettings) -> dg.SensorDefinition:
    @dg.sensor(
        name="revocation_sensor",
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="When the protected revocation epoch changes, marks every installed release blocked. "
        "A skipped tick says why: the epoch it read (unchanged, or first look), no protected target "
        "configured yet, or the protected target unreadable (with its code).",
    )
    def revocation_sensor(context: SensorEvaluationContext):
        protected = ProtectedTarget(settings.protected_target_file)
        if not settings.protected_target_file.exists():
            return dg.SkipReason(
                "no protected target is configured yet (the first release run creates the embedded one)"
            )
        try:
            epoch = protected.current_epoch()
        except DponeError as error:
            return dg.SkipReason(f"the protected target cannot be read ({error.code}); nothing was changed")
        previous = int(context.cursor) if context.cursor else None
        context.update_cursor(str(epoch))
        if previous is None or previous == epoch:
            return dg.SkipReason(
                f"revocation epoch is {epoch}" + (" (unchanged)" if previous is not None else " (first look)")
            )
        blocked = block_installed_releases(settings, epoch)
        observations = [
            dg.AssetObservation(
                asset_key=installed_release.key,
                metadata={
                    "release_id": release_id,
                    "blocked": True,
                    "reason": "authority.revoked",
                    "revocation_epoch": epoch,
                    "previous_epoch": previous,
                },
            )
            for release_id in blocked
        ]
        return dg.SensorResult(
            asset_events=observations,
            skip_reason=None
            if blocked
            else f"revocation epoch moved {previous} -> {epoch}; no installed release was affected",
        )

    return revocation_sensor
