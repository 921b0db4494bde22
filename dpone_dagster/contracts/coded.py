"""Closed sets of stable error codes, each with the sentence an operator reads when it fires.

A `CodedError` subclass declares `codes`: every code it may ever carry, mapped to what the code
means to an operator. Raising with a code outside that set is a programming error (`ValueError`),
so the set is complete by construction and `registered_codes()` can drive docs and a test that
every code is reachable. The one thing a reader could get wrong: registration happens when a module
defining a subclass is imported, so `registered_codes()` only sees imported modules; use
`dpone_dagster.authority.error_catalog.all_codes()` for the complete authority catalogue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from dpone_dagster.errors import DponeError

_REGISTRY: dict[str, tuple[type[CodedError], str]] = {}


class CodedError(DponeError):
    """A `DponeError` whose `code` must come from the class's closed `codes` mapping."""

    codes: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        for code, meaning in cls.__dict__.get("codes", {}).items():
            owner = _REGISTRY.get(code)
            if owner is not None and owner[0] is not cls:
                raise TypeError(f"error code {code!r} is declared by both {owner[0].__name__} and {cls.__name__}")
            _REGISTRY[code] = (cls, meaning)

    def __init__(self, code: str, message: str) -> None:
        if code not in type(self).codes:
            raise ValueError(f"{type(self).__name__} has no registered code {code!r}")
        super().__init__(message, code=code)


def registered_codes() -> dict[str, tuple[type[CodedError], str]]:
    """Every code declared by an imported `CodedError` subclass: code -> (class, operator meaning)."""
    return dict(sorted(_REGISTRY.items()))
