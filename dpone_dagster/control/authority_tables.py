"""Control-store tables of the development authority: the highest accepted grant sequence, and
beside it the highest revocation epoch ever observed.

`accepted_grant_sequences` holds one row per (policy digest, environment): the highest grant
sequence accepted so far and that grant's digest. `revocation_epoch_marks` holds, per (policy
digest, environment), the highest revocation epoch any verification or target admission has
observed. They are the memory behind rollback protection of grants (`authority.rollback`) and of
the epoch source (`authority.epoch_rollback`), both kept by
`dpone_dagster.authority.sql_sequences.SqlAcceptedSequenceStore`. What a reader could get wrong:
a row is only ever raised, never lowered or deleted; losing these tables re-opens replay of older
grants and of revoked receipts, so they are state to back up, not a cache. The epoch marks are a
table of their own (not a column of the sequences) so an existing control store gains them by
`create_all`, with no migration.
"""

from __future__ import annotations

import sqlalchemy as sa

from dpone_dagster.control.store import METADATA

accepted_grant_sequences = sa.Table(
    "accepted_grant_sequences",
    METADATA,
    sa.Column("policy_digest", sa.String(71), primary_key=True),
    sa.Column("environment", sa.String(63), primary_key=True),
    sa.Column("sequence", sa.BigInteger, nullable=False),
    sa.Column("grant_digest", sa.String(71), nullable=False),
)

revocation_epoch_marks = sa.Table(
    "revocation_epoch_marks",
    METADATA,
    sa.Column("policy_digest", sa.String(71), primary_key=True),
    sa.Column("environment", sa.String(63), primary_key=True),
    sa.Column("epoch", sa.BigInteger, nullable=False),
)
