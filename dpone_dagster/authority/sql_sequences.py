"""Durable `AcceptedSequenceStore` over the control store (SQLite or PostgreSQL, SQLAlchemy Core).

Rollback protection is only as good as the memory of the highest accepted sequence, so a deployment
that restarts must keep it here rather than in process memory. `accept` is a compare-and-set that
is atomic on both backends: insert the first row, otherwise update only `WHERE sequence < new`.
`raise_epoch` keeps the revocation epoch's high-water mark beside it the same way (insert, else
update only `WHERE epoch < new`, then read the mark back).
The one thing a reader could get wrong: a row is never lowered or deleted by this adapter; resetting
rollback protection for a (policy, environment) is a reviewed manual operation, not an API.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from dpone_dagster.authority.ports import AcceptedSequence
from dpone_dagster.control.authority_tables import accepted_grant_sequences, revocation_epoch_marks
from dpone_dagster.control.store import METADATA


class SqlAcceptedSequenceStore:
    """The highest accepted grant sequence per (policy, environment), persisted in the control store."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        METADATA.create_all(engine, tables=[accepted_grant_sequences, revocation_epoch_marks])

    def highest(self, policy_digest: str, environment: str) -> AcceptedSequence | None:
        with self._engine.connect() as connection:
            return self._read(connection, policy_digest, environment)

    def accept(self, policy_digest: str, environment: str, accepted: AcceptedSequence) -> bool:
        table = accepted_grant_sequences
        key = (table.c.policy_digest == policy_digest) & (table.c.environment == environment)
        try:
            with self._engine.begin() as connection:
                connection.execute(
                    table.insert().values(
                        policy_digest=policy_digest,
                        environment=environment,
                        sequence=accepted.sequence,
                        grant_digest=accepted.grant_digest,
                    )
                )
                return True
        except sa.exc.IntegrityError:
            pass
        with self._engine.begin() as connection:
            raised = connection.execute(
                table.update()
                .where(key & (table.c.sequence < accepted.sequence))
                .values(sequence=accepted.sequence, grant_digest=accepted.grant_digest)
            )
            if raised.rowcount == 1:
                return True
            return self._read(connection, policy_digest, environment) == accepted

    def raise_epoch(self, policy_digest: str, environment: str, epoch: int) -> int:
        table = revocation_epoch_marks
        key = (table.c.policy_digest == policy_digest) & (table.c.environment == environment)
        try:
            with self._engine.begin() as connection:
                connection.execute(
                    table.insert().values(policy_digest=policy_digest, environment=environment, epoch=epoch)
                )
                return epoch
        except sa.exc.IntegrityError:
            pass
        with self._engine.begin() as connection:
            connection.execute(table.update().where(key & (table.c.epoch < epoch)).values(epoch=epoch))
            return int(connection.execute(sa.select(table.c.epoch).where(key)).scalar_one())

    @staticmethod
    def _read(connection: sa.Connection, policy_digest: str, environment: str) -> AcceptedSequence | None:
        table = accepted_grant_sequences
        row = connection.execute(
            sa.select(table.c.sequence, table.c.grant_digest).where(
                (table.c.policy_digest == policy_digest) & (table.c.environment == environment)
            )
        ).one_or_none()
        return None if row is None else AcceptedSequence(int(row.sequence), row.grant_digest)
