"""`dpone demo` and `dpone prepare`: the top-level commands behind `make demo` and `make dev`."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Attach the top-level commands to the `dpone` app."""
