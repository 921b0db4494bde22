"""Control-store table of the development authority: the highest accepted grant sequence.

`accepted_grant_sequences` holds one row per (policy digest, environment): the highest grant
sequence accepted so far and that grant's digest. It is the memory behind rollback protection
(`dpone_dagster.authority.sql_sequences.SqlAcceptedSequenceStore`). What a reader could get wrong:
a row is only ever raised, never lowered or deleted; losing this table re-opens replay of older
grants, so it is state to back up, not a cache.
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
