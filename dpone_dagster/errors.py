"""Typed, secret-free errors, and the register of every code an error class declares.

Every refusal in dpone-dagster is a `DponeError` subclass with a stable `code` (a lowercase
dotted string that operators and tests key on; never renamed once released) and a message that
carries no secret, no private filesystem root and no SQL. Callers catch by class; tooling keys on
`code`.

A class declares its codes in one of two ways, and both land in the same register when the class
is created: `code = "area.name"` (one class per code, raised as `SomeError(message)`), or a closed
set `codes = {"area.name": "what it means to an operator", ...}` (`contracts.coded.CodedError`,
raised as `SomeError(code, message)`). A code declared by two different classes is refused at
import. The one thing a reader could get wrong: the register only holds the classes of modules
imported so far, and codes passed at a raise (`ConfigError(message, code="config.missing")`) are
declared by no class. The complete catalogue, with every code's operator meaning, is
`dpone_dagster.error_catalog`; `devtools/error_table.py` imports every module and checks the source.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar

CODE_SHAPE = re.compile(r"[a-z][a-z_]*(\.[a-z0-9_]+)+")
"""A code: lowercase dotted words, the first naming its area (`lake.sql_refused`)."""

_DECLARED: dict[str, type[DponeError]] = {}


class DponeError(Exception):
    """Base of every typed failure. `code` is stable; `message` is safe to show to a user."""

    code: str = "dpone.error"
    codes: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        _declare(cls)

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


def _declare(cls: type[DponeError]) -> None:
    """Register the codes `cls` declares in its own body; a module reloaded re-declares its classes."""
    own = list(cls.__dict__.get("codes", {}))
    if isinstance(cls.__dict__.get("code"), str):
        own.append(cls.__dict__["code"])
    for code in own:
        if not CODE_SHAPE.fullmatch(code):
            raise TypeError(f"{cls.__name__} declares {code!r}, which is not a lowercase dotted code")
        holder = _DECLARED.get(code)
        if holder is not None and _qualified(holder) != _qualified(cls):
            raise TypeError(f"error code {code!r} is declared by both {_qualified(holder)} and {_qualified(cls)}")
        _DECLARED[code] = cls


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def declared_codes() -> dict[str, type[DponeError]]:
    """Every code declared by a class imported so far: code -> the declaring class, sorted by code."""
    return dict(sorted(_DECLARED.items()))


_declare(DponeError)


class ConfigError(DponeError):
    """The configuration (dpone.yaml or environment) is invalid."""

    code = "config.invalid"


class LakeError(DponeError):
    """A DuckLake could not be resolved, attached or written safely."""

    code = "lake.error"


class WorkspaceError(DponeError):
    """A workspace operation was refused."""

    code = "workspace.error"
