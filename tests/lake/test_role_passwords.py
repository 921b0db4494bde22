"""Fork role passwords are sealed in the control store under a key the store does not hold.

On the default SQLite control store (the rows are what `lake_catalog_role` holds on any backend;
provisioning against PostgreSQL 15 is `test_isolation_file_doors.py::test_credentials_…` and
`test_readonly_ancestors.py`). The key: `DPONE_FORK_ROLE_KEY`, else `<state>/keys/…` (0600).
"""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet

from dpone_dagster.config import load_config
from dpone_dagster.control.role_passwords import (
    KEY_FILE,
    ROLE_KEY_ENV,
    RoleKeyMismatchError,
    RoleKeyUnsafeError,
    role_key,
    seal,
    stored_passwords,
)
from dpone_dagster.control.role_tables import lake_catalog_role
from dpone_dagster.control.store import open_store, reset_store_cache
from dpone_dagster.lake.lifecycle.roles import StoredRolePassword, read_password

ROLE = "dpone_w_0123456789abcdef"


@pytest.fixture
def store():
    reset_store_cache()
    url = load_config().control_store
    open_store(url)
    return url


def _row(url: str, password: str) -> None:
    with open_store(url).begin() as conn:
        conn.execute(lake_catalog_role.insert().values(
            role_name=ROLE, catalog="postgres:x", workspace_id="wm-fork-a", lake="main", kind="writer",
            metadata_schema="wm_fork_a", admin="{}", password=password, ready=True,
            created_at=datetime.now(UTC).isoformat(),
        ))  # fmt: skip


def _stored(url: str) -> str:
    with open_store(url).connect() as conn:
        return conn.execute(sa.select(lake_catalog_role.c.password)).scalar()


def test_a_sealed_password_is_read_back_and_never_stored_in_clear(store):
    key = role_key(create=True)
    _row(store, seal("the clear password", key))
    assert "the clear password" not in _stored(store) and _stored(store).startswith("fernet1:")
    assert read_password(store, ROLE) == "the clear password"
    rendered = StoredRolePassword(ROLE, False, store).render(redact=False, credentials=lambda e: "")
    assert rendered == "'the clear password'"
    assert StoredRolePassword(ROLE, False, store).render(redact=True, credentials=lambda e: "") == "'<redacted>'"


def test_the_key_file_is_private_to_its_owner(store):
    role_key(create=True)
    path = load_config().state_path / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    os.chmod(path, 0o644)
    with pytest.raises(RoleKeyUnsafeError) as caught:
        role_key()
    assert caught.value.code == "lake.fork_role_key_unsafe"


def test_a_row_from_before_sealing_is_sealed_when_first_read(store):
    _row(store, "legacy clear text")
    assert read_password(store, ROLE) == "legacy clear text"
    assert _stored(store).startswith("fernet1:") and "legacy" not in _stored(store)
    assert stored_passwords(store, [ROLE]) == {ROLE: "legacy clear text"}


def test_another_key_cannot_open_the_rows_and_says_so(store, monkeypatch):
    _row(store, seal("pw", role_key(create=True)))
    monkeypatch.setenv(ROLE_KEY_ENV, Fernet.generate_key().decode())  # the env key wins over the file
    with pytest.raises(RoleKeyMismatchError) as caught:
        read_password(store, ROLE)
    assert caught.value.code == "lake.fork_role_key_mismatch" and "pw" not in str(caught.value)
    # provisioning sees "no usable password" and gives the role a new one (ALTER ROLE)
    assert stored_passwords(store, [ROLE]) == {ROLE: None}


def test_a_process_without_any_key_cannot_read_and_says_why(store):
    _row(store, seal("pw", Fernet.generate_key()))
    with pytest.raises(RoleKeyMismatchError):
        read_password(store, ROLE)  # no env key, no key file: refused, not guessed
