"""Render the schema reference of `docs/authority.md` from the models (its error codes are in docs/errors.md).

    python -m devtools.schema_doc            # print the generated section
    python -m devtools.schema_doc --write    # replace it in docs/authority.md
    python -m devtools.schema_doc --check    # exit 1 if the committed doc is stale

The generated text sits between the two marker comments; everything outside them is hand-written.
The one thing a reader could get wrong: the reference is derived from the pydantic JSON schema of
each dispatchable model, so editing the markdown by hand is pointless; change the model and rerun.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dpone_dagster.contracts import bounds
from dpone_dagster.contracts.dispatch import DOCUMENT_TYPES

BEGIN = "<!-- BEGIN GENERATED: python -m devtools.schema_doc --write -->"
END = "<!-- END GENERATED -->"
DOC_PATH = Path(__file__).resolve().parents[1] / "docs" / "authority.md"
ERROR_CODES_POINTER = (
    "The codes these documents, their verification and admission raise are rows of the one table of "
    "every code, with what each means to an operator: [errors.md](errors.md) (`python -m devtools.error_table`)."
)

_NAMED_PATTERNS = {
    r"^sha256:[0-9a-f]{64}$": "digest (`sha256:` + 64 hex)",
    r"^[0-9a-f]{40}$": "git commit (40 hex)",
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$": "UTC timestamp `YYYY-MM-DDTHH:MM:SSZ`",
    r"^[0-9a-f]{64}$": "64 hex",
    r"^[0-9a-f]{128}$": "Ed25519 signature (128 hex)",
}


def render() -> str:
    families = {"development": [], "production": [], "synthetic": []}  # type: dict[str, list[DocumentType]]
    for entry in DOCUMENT_TYPES.values():
        families[entry.family].append(entry)
    lines: list[str] = [BEGIN, "", "### Documents", ""]
    components: dict[str, dict[str, Any]] = {}
    for family, entries in families.items():
        lines += [f"#### {family.capitalize()} family", ""]
        seen: set[type] = set()
        for entry in entries:
            if entry.model in seen:
                continue
            seen.add(entry.model)
            schema = entry.model.model_json_schema(by_alias=True)
            components.update(schema.get("$defs", {}))
            profiles = [e.profile for e in entries if e.model is entry.model and e.profile]
            title = f"`{entry.schema}`" + (f" · profile {', '.join(f'`{p}`' for p in profiles)}" if profiles else "")
            lines += [f"##### {title}", "", _first_line(schema.get("description", "")), ""]
            domain = f"`{entry.schema}.<profile>`" if profiles else f"`{entry.schema}`"
            lines += [f"Model `{entry.model.__name__}`; identity domain {domain}.", ""]
            lines += _table(schema)
    lines += ["### Components", ""]
    for name in sorted(components):
        lines += [f"##### {name}", "", _first_line(components[name].get("description", "")), ""]
        lines += _table(components[name])
    lines += ["### Error codes", "", ERROR_CODES_POINTER, "", END]
    return "\n".join(lines)


def _first_line(text: str) -> str:
    return text.strip().split("\n\n")[0].replace("\n", " ")


def _table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| Field | Type | Constraints |", "|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        kind, constraints = _describe(prop)
        if name not in required:
            constraints = ", ".join(filter(None, [constraints, "has a default, but must still be present on the wire"]))
        rows.append(f"| `{name}` | {kind} | {constraints} |")
    return rows + [""]


def _describe(prop: dict[str, Any]) -> tuple[str, str]:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})", ""
    if "anyOf" in prop:
        parts = [_describe(option) for option in prop["anyOf"]]
        return " or ".join(kind for kind, _ in parts), "; ".join(c for _, c in parts if c)
    if "const" in prop:
        return f'`"{prop["const"]}"`', "exactly this value"
    if "enum" in prop:
        return "one of " + ", ".join(f'`"{value}"`' for value in prop["enum"]), ""
    kind = prop.get("type", "any")
    constraints: list[str] = []
    if kind == "string":
        pattern = prop.get("pattern")
        if pattern in _NAMED_PATTERNS:
            kind = _NAMED_PATTERNS[pattern]
        elif pattern:
            constraints.append(f"pattern `{pattern}`")
        if "maxLength" in prop and pattern not in _NAMED_PATTERNS:
            constraints.append(f"≤ {prop['maxLength']} chars")
    elif kind == "integer":
        low, high = prop.get("minimum"), prop.get("maximum")
        constraints.append(f"{low}..{'2^53-1' if high == bounds.MAX_SAFE_INTEGER else high}")
    elif kind == "array":
        item_kind, item_constraints = _describe(prop.get("items", {}))
        kind = f"list of {item_kind}"
        if prop.get("maxItems") == 0:
            constraints.append("must be empty")
        else:
            constraints.append(f"{prop.get('minItems', 0)}..{prop.get('maxItems', '∞')} items")
        if prop.get("x-sorted"):
            constraints.append("sorted ascending, unique")
        if item_constraints:
            constraints.append(f"each: {item_constraints}")
    elif kind == "null":
        return "null", ""
    return kind, ", ".join(constraints)


def _replace_generated(document: str, generated: str) -> str:
    if BEGIN not in document or END not in document:
        raise ValueError("docs/authority.md lacks the generated-section markers")
    head, _, rest = document.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + generated + tail


def main(argv: list[str]) -> int:
    generated = render()
    if argv == ["--write"]:
        DOC_PATH.write_text(_replace_generated(DOC_PATH.read_text(), generated))
        return 0
    if argv == ["--check"]:
        current = DOC_PATH.read_text()
        return 0 if _replace_generated(current, generated) == current else 1
    if argv:
        print("usage: python -m devtools.schema_doc [--write | --check]", file=sys.stderr)
        return 2
    print(generated)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
