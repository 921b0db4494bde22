"""Turn a typed refusal into a failed Dagster step that shows its stable code.

Inside `refusals_as_failures()`, any `DponeError` becomes a `dagster.Failure` whose description is
`[code] message` and whose metadata carries the code (and, for an uncertain write, the stage and how
many objects are known written or pending). Anything else is a bug and propagates unchanged.

What a reader could get wrong: the original exception is deliberately not chained (`from None`):
its context may hold a path or a connection string, and the code plus message is the whole story
an operator needs (the meaning of each code is in `docs/federation.md` and `docs/authority.md`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from dpone_dagster.errors import DponeError
from dpone_dagster.release.errors import DurabilityUncertainError


def failure_metadata(error: DponeError) -> dict[str, dg.RawMetadataValue]:
    metadata: dict[str, dg.RawMetadataValue] = {"error_code": error.code}
    if isinstance(error, DurabilityUncertainError):
        metadata.update(
            {
                "stage": error.stage,
                "release_id": error.release_id,
                "objects_known_written": len(error.written),
                "objects_pending": len(error.pending),
            }
        )
    reason = getattr(error, "reason", None)
    if isinstance(reason, str):
        metadata["reason"] = reason
    return metadata


@contextmanager
def refusals_as_failures() -> Iterator[None]:
    try:
        yield
    except DponeError as error:
        raise dg.Failure(description=str(error), metadata=failure_metadata(error), allow_retries=False) from None
