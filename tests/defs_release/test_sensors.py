"""The release sensors, evaluated with `build_sensor_context` over real state directories."""

from __future__ import annotations

import json

import dagster as dg

from dpone_dagster.clock import SystemClock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.control.store import open_store
from dpone_dagster.defs.release.sensors import build_release_inputs_sensor, build_revocation_sensor
from dpone_dagster.release.platform.target import GRANT_KEY, ProtectedTargetDocument
from dpone_dagster.release.state import ReleaseStateMachine


def test_inputs_sensor_requests_a_run_once_per_grant_and_source(copied_release, env_of):
    setup = env_of(copied_release)
    sensor = build_release_inputs_sensor(setup.settings)

    first = sensor.evaluate_tick(dg.build_sensor_context(cursor=None))
    assert [r.job_name or "release_job" for r in first.run_requests] == ["release_job"]
    request = first.run_requests[0]
    assert request.tags["dpone/trigger"] == "first look"
    assert request.tags["dpone/grant_digest"].startswith("sha256:")

    again = sensor.evaluate_tick(dg.build_sensor_context(cursor=first.cursor))
    assert not again.run_requests
    assert "unchanged since the last requested release run" in again.skip_message

    grant = setup.authority_dir / GRANT_KEY
    grant.write_bytes(grant.read_bytes().replace(b'"sequence":1', b'"sequence":2'))
    changed = sensor.evaluate_tick(dg.build_sensor_context(cursor=first.cursor))
    assert len(changed.run_requests) == 1
    assert changed.run_requests[0].tags["dpone/trigger"] == "grant changed"
    assert changed.run_requests[0].run_key != request.run_key


def test_inputs_sensor_skips_with_a_reason_before_any_grant_exists(fresh, env_of):
    setup = env_of(fresh)
    result = build_release_inputs_sensor(setup.settings).evaluate_tick(dg.build_sensor_context(cursor=None))
    assert not result.run_requests
    assert "no readable signed grant" in result.skip_message
    assert "release.authority_documents_missing" in result.skip_message


def test_revocation_sensor_blocks_installed_releases_when_the_epoch_moves(copied_release, env_of):
    setup = env_of(copied_release)
    sensor = build_revocation_sensor(setup.settings)
    first = sensor.evaluate_tick(dg.build_sensor_context(cursor=None))
    assert first.cursor == "0" and "first look" in first.skip_message

    unchanged = sensor.evaluate_tick(dg.build_sensor_context(cursor="0"))
    assert "unchanged" in unchanged.skip_message and not unchanged.asset_events

    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": 1}).canonical_bytes())
    moved = sensor.evaluate_tick(dg.build_sensor_context(cursor="0"))
    assert moved.cursor == "1"
    observations = moved.asset_events
    assert len(observations) == 1
    metadata = {k: v.value for k, v in observations[0].metadata.items()}
    assert metadata["blocked"] is True and metadata["reason"] == "authority.revoked"
    states = ReleaseStateMachine(open_store(setup.settings.control_store_url), SystemClock())
    history = states.history(metadata["release_id"])
    blocked = [event for event in history if event.outcome == "blocked"]
    assert len(blocked) == 1 and json.loads(blocked[0].detail)["revocation_epoch"] == 1
