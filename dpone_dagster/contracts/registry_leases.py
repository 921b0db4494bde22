"""The registry lease that names its holder process (`dpone.registry-lease.v2`).

A lease (`dpone_dagster.release.delivery.leases`) marks a publication, materialization or cleanup in
flight under `leases/` of a registry. Version 2 adds who holds it, so an operator can tell a lease
whose process was killed from one whose process is still writing:

- `process`: the holder's host name, the kernel boot id, the pid namespace, the pid and the process
  start time in clock ticks since boot (`/proc/<pid>/stat` field 22). A pid is reused; a pid with the
  same start time on the same boot of the same host and namespace is the same process;
- `subject`: the release identity the holder works on (publication, materialization), or none
  (cleanup), so a successful retry can release exactly what the killed attempt of it held.

What a reader could get wrong: nothing here is authority; the fields are what the holder *said*
about itself. They only decide whether an operator may break a lease without waiting for its TTL,
and only on the same host (`dpone release break-lease`). Version 1 leases (`release_records.RegistryLease`)
are still read: they name no process, so their holder can never be proved gone before they expire.
The bytes are persisted (another holder reads them): any field change is a new schema version.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dpone_dagster.contracts.base import ContractModel
from dpone_dagster.contracts.bounds import Count, Digest, Identifier, PositiveCount, Timestamp
from dpone_dagster.contracts.release_records import LeaseHolder

LEASE_V2_SCHEMA = "dpone.registry-lease.v2"


class LeaseHolderProcess(ContractModel):
    """The process that wrote a lease, as it described itself when it took the lease."""

    host: Identifier
    boot_id: Identifier
    pid_namespace: Identifier
    pid: PositiveCount
    start_ticks: Count


class RegistryLeaseV2(ContractModel):
    """One operation in flight on a registry, with its holder process; abandoned once `expires_at` passed."""

    KIND = LEASE_V2_SCHEMA

    schema_: Literal["dpone.registry-lease.v2"] = Field(default=LEASE_V2_SCHEMA, alias="schema")
    holder: LeaseHolder
    lease_id: Identifier
    acquired_at: Timestamp
    expires_at: Timestamp
    subject: Digest | None
    process: LeaseHolderProcess
