"""Typed, secret-free errors.

Every refusal in dpone-dagster is a `DponeError` subclass with a stable `code` (a lowercase
dotted string that operators and tests key on; never renamed once released) and a message that
carries no secret, no private filesystem root and no SQL. Callers catch by class; tooling keys on
`code`.
"""

from __future__ import annotations


class DponeError(Exception):
    """Base of every typed failure. `code` is stable; `message` is safe to show to a user."""

    code: str = "dpone.error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class ConfigError(DponeError):
    """The configuration (dpone.yaml or environment) is invalid."""

    code = "config.invalid"


class LakeError(DponeError):
    """A DuckLake could not be resolved, attached or written safely."""

    code = "lake.error"


class WorkspaceError(DponeError):
    """A workspace operation was refused."""

    code = "workspace.error"
