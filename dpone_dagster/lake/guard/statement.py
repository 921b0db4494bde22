"""SQL statements that may carry credentials, rendered either redacted (to show) or real (to run).

A `Statement` is a sequence of literal SQL text and `Secret` references (an environment-variable
name, never a value). Values are read through a credential resolver only when a statement is
rendered unredacted, right before it runs, so a resolved plan can be logged, compared, cached or put
in metadata without ever holding a credential.

What a reader could get wrong: the text parts are already-escaped SQL. Build them with
`sql_string` / `quote_ident`; never paste user input into a part unescaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dpone_dagster.config import resolve_secret

REDACTED = "<redacted>"
CredentialResolver = Callable[[str], str]

_PLAIN_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def sql_string(value: str) -> str:
    """A single-quoted SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def quote_ident(name: str) -> str:
    """An identifier, quoted only when it needs to be."""
    if _PLAIN_IDENT.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def libpq_value(value: str) -> str:
    """A value for a libpq `key=value` connection string."""
    if value and not re.search(r"[\s'\\]", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Secret:
    """A credential by reference. `in_libpq_literal` renders `password=<value>` inside a SQL string."""

    env_name: str
    in_libpq_literal: bool = False

    def render(self, *, redact: bool, credentials: CredentialResolver) -> str:
        if self.in_libpq_literal:
            value = REDACTED if redact else libpq_value(credentials(self.env_name))
            return "password=" + value.replace("'", "''")
        return sql_string(REDACTED if redact else credentials(self.env_name))


@dataclass(frozen=True)
class Statement:
    parts: tuple[str | Secret, ...]

    @classmethod
    def of(cls, *parts: str | Secret) -> Statement:
        return cls(tuple(parts))

    def render(self, *, redact: bool = True, credentials: CredentialResolver | None = None) -> str:
        resolver = credentials or resolve_secret
        return "".join(
            part if isinstance(part, str) else part.render(redact=redact, credentials=resolver) for part in self.parts
        )

    @property
    def has_secret(self) -> bool:
        return any(isinstance(part, Secret) for part in self.parts)
