"""Issue 20 item 4, as composed: every receipt issuer of a platform keeps the revocation epoch's
high-water mark in the control store, so a rolled-back epoch is refused by the next issuer too
(a new run, a new `dpone release` command), not only by the one that saw the higher epoch."""

from __future__ import annotations

import pytest

from dpone_dagster.contracts.base import parse_document
from dpone_dagster.defs.release.resources import AuthorityPlatform
from dpone_dagster.errors import DponeError
from dpone_dagster.release.platform.target import ProtectedTargetDocument
from dpone_dagster.release.services import ReleaseAdmission


def _set_epoch(setup, epoch: int) -> None:
    path = setup.settings.protected_target_file
    target = parse_document(ProtectedTargetDocument, path.read_bytes())
    path.write_bytes(target.model_copy(update={"revocation_epoch": epoch}).canonical_bytes())


def test_a_later_issuer_refuses_the_epoch_an_earlier_one_saw_rolled_back(fresh, env_of):
    setup = env_of(fresh)
    AuthorityPlatform(setup.settings).prepare()
    _set_epoch(setup, 2)
    assert ReleaseAdmission(setup.settings).issuer().issue_cleanup().revocation_epoch == 2
    _set_epoch(setup, 0)
    with pytest.raises(DponeError) as raised:
        ReleaseAdmission(setup.settings).issuer().issue_cleanup()
    assert raised.value.code == "authority.epoch_rollback"
