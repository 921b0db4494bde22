"""Fork role passwords sealed for the control store, under a key the control store does not hold.

`lake_catalog_role.password` holds `fernet1:<token>` (Fernet from `cryptography`: AES-128-CBC with
an HMAC-SHA256 tag), never the password. The key comes from, in this order:
1. the environment variable `DPONE_FORK_ROLE_KEY` (a Fernet key, `Fernet.generate_key()`): for
   deployments whose processes share no state folder — every process that provisions forks or acts
   for one gets the same value from its secret manager;
2. the key file `<state dir>/keys/fork_role_passwords.key` (folder 0700, file 0600), created at the
   first provisioning: the embedded default and single-machine setups.
Why not in the store itself: the store is the thing a fork can reach by SQL (`postgres_scan` of its
DSN, a shared PostgreSQL, a backup) — with the key elsewhere, a copy of the rows is only ciphertext.

What a reader could get wrong: this protects the rows at rest, not from a process that holds both
the key and the store (a fork's own process must decrypt its roles' passwords to attach, so on one
machine it can read the key file too). With the default SQLite store in the same state folder, the
key file sits beside it: then it is the file mode (0600) and kernel confinement that keep other
users and other forks out, not the encryption. A lost or changed key makes stored passwords
unreadable (`lake.fork_role_key_mismatch`); `dpone fork create`/`ensure`, where the lake's admin
credential is set, gives the roles new passwords. Rows written before sealing existed (clear text)
are sealed in place the first time they are read. `cryptography` is imported where a password is
sealed or unsealed, not with this module: every dbt invocation in a fork imports this module, and on
the embedded default (no roles) the import alone cost ~0.1 s of each.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from dpone_dagster.config import SecretMissingError, load_config, resolve_secret
from dpone_dagster.control.role_tables import lake_catalog_role as role_table
from dpone_dagster.control.store import open_store
from dpone_dagster.errors import LakeError

ROLE_KEY_ENV = "DPONE_FORK_ROLE_KEY"
KEY_FILE = Path("keys") / "fork_role_passwords.key"
SEALED_PREFIX = "fernet1:"


class RoleKeyMismatchError(LakeError):
    code = "lake.fork_role_key_mismatch"


class RoleKeyUnsafeError(LakeError):
    code = "lake.fork_role_key_unsafe"


def _key_from_file(path: Path, *, create: bool) -> bytes:
    if create and not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process made it first: read theirs
        else:
            from cryptography.fernet import Fernet

            with os.fdopen(fd, "wb") as handle:
                handle.write(Fernet.generate_key())
    try:
        mode = path.stat().st_mode
        key = path.read_bytes().strip()
    except FileNotFoundError:
        raise RoleKeyMismatchError(
            "this process has no fork role key (neither DPONE_FORK_ROLE_KEY nor the state folder's key "
            "file), so it cannot read the fork's stored role passwords"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RoleKeyUnsafeError("the fork role key file is readable by other users; make it 0600")
    return key


def role_key(state_path: Path | None = None, *, create: bool = False) -> bytes:
    """The key role passwords are sealed under (see module docstring for where it comes from)."""
    try:
        return resolve_secret(ROLE_KEY_ENV).encode()
    except SecretMissingError:
        pass
    return _key_from_file((state_path or load_config().state_path) / KEY_FILE, create=create)


def _fernet(key: bytes):
    from cryptography.fernet import Fernet

    try:
        return Fernet(key)
    except ValueError:
        raise RoleKeyMismatchError("the fork role key is not a Fernet key (Fernet.generate_key())") from None


def seal(password: str, key: bytes) -> str:
    return SEALED_PREFIX + _fernet(key).encrypt(password.encode()).decode()


def is_sealed(stored: str) -> bool:
    return stored.startswith(SEALED_PREFIX)


def unseal(stored: str, key: bytes) -> str:
    """The password of a sealed value; a clear-text (pre-sealing) value is returned as it is."""
    if not is_sealed(stored):
        return stored
    from cryptography.fernet import InvalidToken

    try:
        return _fernet(key).decrypt(stored[len(SEALED_PREFIX) :].encode()).decode()
    except InvalidToken:
        raise RoleKeyMismatchError(
            "a fork role password was sealed under another key than this process's; re-provision the "
            "fork's roles (dpone fork ensure) where the lake's admin credential is set"
        ) from None


def store_sealed(store_url: str, passwords: dict[str, str], key: bytes, *, only_if: str | None = None) -> None:
    """Write `passwords` (role -> clear password) sealed; `only_if`: only over that stored value."""
    with open_store(store_url).begin() as conn:
        for role, password in passwords.items():
            query = role_table.update().where(role_table.c.role_name == role)
            if only_if is not None:
                query = query.where(role_table.c.password == only_if)
            conn.execute(query.values(password=seal(password, key)))


def stored_passwords(store_url: str, roles: Sequence[str], *, ready_only: bool = False) -> dict[str, str | None]:
    """role -> clear password of the stored rows; None for a row without one, or whose sealed
    password this process's key cannot open (provisioning then gives the role a new one). Rows
    from before sealing are sealed in place."""
    query = sa.select(role_table.c.role_name, role_table.c.password).where(role_table.c.role_name.in_(list(roles)))
    if ready_only:
        query = query.where(role_table.c.ready.is_(True))
    with open_store(store_url).connect() as conn:
        rows = conn.execute(query).all()
    if not any(password for _, password in rows):
        return {name: None for name, _ in rows}
    key = role_key(create=True)
    out: dict[str, str | None] = {}
    for name, password in rows:
        try:
            out[name] = unseal(password, key) if password else None
        except RoleKeyMismatchError:
            out[name] = None
        if password and not is_sealed(password):
            store_sealed(store_url, {name: password}, key, only_if=password)
    return out
