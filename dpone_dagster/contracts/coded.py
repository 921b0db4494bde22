"""Closed sets of stable error codes, each with the sentence an operator reads when it fires.

A `CodedError` subclass declares `codes`: every code it may ever carry, mapped to what the code
means to an operator. Raising with a code outside that set is a programming error (`ValueError`),
so the set is complete by construction. The one thing a reader could get wrong: the set is
registered by `DponeError` itself when the class is created (`dpone_dagster.errors`), in the same
register as the one-class-per-code errors; the complete catalogue is `dpone_dagster.error_catalog`.
"""

from __future__ import annotations

from dpone_dagster.errors import DponeError


class CodedError(DponeError):
    """A `DponeError` whose `code` must come from the class's closed `codes` mapping."""

    def __init__(self, code: str, message: str) -> None:
        if code not in type(self).codes:
            raise ValueError(f"{type(self).__name__} has no registered code {code!r}")
        super().__init__(message, code=code)
