"""The complete catalogue of error codes owned by the contracts and authority layers.

Docs (`schema_doc`) and the reachability test both read this list, so a new code shows up in the
operator documentation and must get a test that triggers it. The one thing a reader could get
wrong: the global `registered_codes()` also holds other layers' codes (release, lake, ...); this
catalogue is only the authority/contracts slice.
"""

from __future__ import annotations

from dpone_dagster.authority.errors import AuthorityError
from dpone_dagster.authority.target_admission import ActivationAuthorityError, AdmissionError, RecoveryRequiredError
from dpone_dagster.contracts.base import ContractError
from dpone_dagster.contracts.canonical import CanonicalError
from dpone_dagster.contracts.coded import CodedError
from dpone_dagster.contracts.dispatch import DispatchError
from dpone_dagster.contracts.identity import IdentityError

ERROR_CLASSES: tuple[type[CodedError], ...] = (
    CanonicalError,
    IdentityError,
    ContractError,
    DispatchError,
    AuthorityError,
    AdmissionError,
    ActivationAuthorityError,
    RecoveryRequiredError,
)


def all_codes() -> dict[str, str]:
    """code -> what it means to an operator, sorted by code."""
    return dict(sorted((code, meaning) for cls in ERROR_CLASSES for code, meaning in cls.codes.items()))


def owner_of(code: str) -> type[CodedError]:
    """The error class that declares `code`."""
    for cls in ERROR_CLASSES:
        if code in cls.codes:
            return cls
    raise KeyError(code)
