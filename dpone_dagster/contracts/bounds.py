"""Bounded field types shared by every contract: digests, commits, UTC timestamps, names, counts.

Every string, list and integer in a document has a fixed upper bound so that a hostile document
costs bounded memory and time. Scalars are strict: `"5"` is not a count and `1.0` is not an
integer. The one thing a reader could get wrong: lists are not sorted for you. `sorted_unique`
fields *reject* unsorted or repeated input instead of normalizing it, because a signed document's
bytes must already be the one canonical spelling.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, StrictInt, StringConstraints

from dpone_dagster.contracts.canonical import MAX_SAFE_INTEGER
from dpone_dagster.contracts.identity import DIGEST_PATTERN

MAX_GRANT_WINDOW_SECONDS = 7 * 24 * 3600
MAX_WORKLOADS = 10_000
MAX_SIGNERS = 32
MAX_LIST = 10_000
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")


def parse_timestamp(value: str) -> datetime:
    """Parse a `YYYY-MM-DDTHH:MM:SSZ` string into an aware UTC datetime; raise ValueError otherwise."""
    if not isinstance(value, str) or not _TIMESTAMP.fullmatch(value):
        raise ValueError("timestamp must be UTC in the form YYYY-MM-DDTHH:MM:SSZ")
    return datetime.strptime(value, TIMESTAMP_FORMAT).replace(tzinfo=UTC)


def format_timestamp(moment: datetime) -> str:
    """Format an aware datetime as the contracts' UTC string (sub-second precision is dropped)."""
    if moment.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return moment.astimezone(UTC).strftime(TIMESTAMP_FORMAT)


def _valid_timestamp(value: str) -> str:
    parse_timestamp(value)
    return value


def bounded_text(pattern: str, max_length: int) -> Any:
    """A strict string type limited by a regular expression and a maximum length."""
    return Annotated[str, StringConstraints(strict=True, pattern=pattern, max_length=max_length)]


Digest = bounded_text(DIGEST_PATTERN, 71)
ContentSha256 = bounded_text(r"^[0-9a-f]{64}$", 64)  # plain hex of raw bytes; never comparable with a `Digest`
GitCommit = bounded_text(r"^[0-9a-f]{40}$", 40)
Timestamp = Annotated[
    bounded_text(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$", 20), AfterValidator(_valid_timestamp)
]
Name = bounded_text(r"^[a-z0-9][a-z0-9_.-]{0,62}$", 63)
Identifier = bounded_text(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,255}$", 256)
WorkloadId = Identifier
RepositoryName = bounded_text(r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*){0,7}$", 200)
LogicalPath = bounded_text(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*){0,15}$", 400)
Text = bounded_text(r"^[^\x00-\x1f\x7f]*$", 400)
PublicKeyHex = bounded_text(r"^[0-9a-f]{64}$", 64)
SignatureHex = bounded_text(r"^[0-9a-f]{128}$", 128)

Count = Annotated[StrictInt, Field(ge=0, le=MAX_SAFE_INTEGER)]
PositiveCount = Annotated[StrictInt, Field(ge=1, le=MAX_SAFE_INTEGER)]
WorkloadCount = Annotated[StrictInt, Field(ge=1, le=MAX_WORKLOADS)]

T = TypeVar("T")


def require_sorted_unique(items: Sequence[T], key: Callable[[T], Any] | None = None) -> Sequence[T]:
    """Return `items` if strictly increasing by `key`; raise ValueError (a validation error) otherwise."""
    keys = [key(item) if key else item for item in items]
    for before, after in zip(keys, keys[1:]):
        if not before < after:
            raise ValueError("items must be sorted ascending and unique")
    return items


def sorted_unique(
    item: Any, *, max_length: int = MAX_LIST, min_length: int = 0, key: Callable[[Any], Any] | None = None
) -> Any:
    """A tuple field of `item` that must arrive sorted by `key` (default: the item) and without repeats."""
    return Annotated[
        tuple[item, ...],
        Field(min_length=min_length, max_length=max_length, json_schema_extra={"uniqueItems": True, "x-sorted": True}),
        AfterValidator(lambda items: require_sorted_unique(items, key)),
    ]
