"""The embedded default's synthetic authority: created once, renewed only when expired, never for a platform."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest

from dpone_dagster.authority.memory import FixedClock
from dpone_dagster.clock import SystemClock
from dpone_dagster.contracts.base import parse_document
from dpone_dagster.contracts.grant import DevelopmentGrant
from dpone_dagster.defs.release.synthetic_bootstrap import (
    GRANT_VALIDITY,
    ensure_synthetic_authority,
    renew_expired_synthetic_grant,
)
from dpone_dagster.errors import ConfigError
from dpone_dagster.release.platform.target import GRANT_KEY, ProtectedTargetDocument
from tests.synthetic_project import NATIVE_MODELS, ORDINARY_FLOWS

REPO_ROOT = Path(__file__).resolve().parents[2]


def _grant(setup) -> DevelopmentGrant:
    return parse_document(DevelopmentGrant, (setup.authority_dir / GRANT_KEY).read_bytes())


def test_first_use_creates_a_synthetic_authority_and_later_uses_keep_it(fresh, env_of):
    setup = env_of(fresh)
    now = SystemClock().now()
    assert ensure_synthetic_authority(setup.settings, FixedClock(now)) is True
    target = parse_document(ProtectedTargetDocument, setup.settings.protected_target_file.read_bytes())
    assert target.synthetic is True and target.environment.startswith("synthetic-")
    first = _grant(setup)
    assert (
        first.sequence == 1
        and len(first.native_membership) == NATIVE_MODELS
        and len(first.ordinary_membership) == ORDINARY_FLOWS
    )
    assert ensure_synthetic_authority(setup.settings, FixedClock(now + timedelta(hours=1))) is False
    assert _grant(setup) == first


def test_an_expired_synthetic_grant_is_renewed_only_as_a_visible_logged_step(fresh, env_of, caplog):
    setup = env_of(fresh)
    now = SystemClock().now()
    ensure_synthetic_authority(setup.settings, FixedClock(now))
    first = _grant(setup)
    assert renew_expired_synthetic_grant(setup.settings, FixedClock(now + timedelta(hours=1))) is None
    later = now + GRANT_VALIDITY + timedelta(hours=1)
    assert ensure_synthetic_authority(setup.settings, FixedClock(later)) is False  # never renews silently
    assert _grant(setup) == first
    with caplog.at_level(logging.WARNING):
        renewal = renew_expired_synthetic_grant(setup.settings, FixedClock(later))
    renewed = _grant(setup)
    assert renewed.sequence == 2 and (renewal.previous_sequence, renewal.sequence) == (1, 2)
    assert (renewal.previous_expires_at, renewal.expires_at) == (first.expires_at, renewed.expires_at)
    assert renewal.line() in caplog.text
    assert renewed.expires_at > _grant(setup).not_before


def test_a_configured_platform_never_gets_synthetic_authority(fresh, env_of):
    setup = env_of(fresh)
    setup.configured_platform = True
    with pytest.raises(ConfigError) as info:
        ensure_synthetic_authority(setup.settings, SystemClock())
    assert info.value.code == "config.synthetic_authority_misplaced"
    assert not setup.authority_dir.exists()


def test_synthetic_authority_is_never_signed_into_s3(fresh, env_of):
    setup = env_of(fresh)
    relabelled = setup.settings.model_copy(update={"authority_location": "s3://bucket/authority/"})
    with pytest.raises(ConfigError) as info:
        ensure_synthetic_authority(relabelled, SystemClock())
    assert info.value.code == "config.synthetic_authority_misplaced"
    assert not (REPO_ROOT / "s3:").exists()
