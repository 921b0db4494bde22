"""Run every benchmark module in `bench/` and print one table (`make bench`).

A module that fails is reported as a row with its error and does not stop the others; the exit
status is 1 when any module failed, 0 otherwise (a missed goal is shown, not fatal).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

COLUMNS = ("name", "baseline_s", "measured_s", "ratio", "goal", "met", "note")


def discover() -> list[str]:
    """Names of the `bench.bench_*` modules, sorted."""
    here = Path(__file__).resolve().parent
    return sorted(f"bench.{m.name}" for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_"))


def _cell(row: dict, column: str) -> str:
    value = row.get(column, "")
    if column in ("baseline_s", "measured_s") and isinstance(value, int | float):
        return f"{value:.4f}"
    if column == "ratio" and isinstance(value, int | float):
        return f"{value:.3g}x"
    if column == "met" and isinstance(value, bool):
        return "yes" if value else "NO"
    return str(value)


def format_table(rows: Sequence[dict]) -> str:
    cells = [[_cell(row, c) for c in COLUMNS] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def main(argv: Sequence[str] = ()) -> int:
    from bench.timing import ensure_bytecode

    ensure_bytecode()  # as an installed package has it (bench/timing.py)
    wanted = set(argv)
    rows: list[dict] = []
    failed = False
    for name in discover():
        if wanted and name.removeprefix("bench.") not in wanted:
            continue
        try:
            module = importlib.import_module(name)
            run = getattr(module, "run", None)
            if run is None:
                continue
            rows.extend(run())
        except Exception as exc:
            failed = True
            traceback.print_exc()
            rows.append({"name": name, "note": f"failed: {type(exc).__name__}"})
    print(format_table(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
