"""The dbt manifest follows a model's plain-SQL edit without a `dbt parse`.

The edit a developer makes before every run is to a model's SQL, not to its Jinja: a column, a
filter, a join condition. dbt's parse of a model depends only on the file's Jinja (its `ref`,
`source`, `config` calls and control flow); the SQL text around it reaches the manifest as two
fields of that model's node, `raw_code` (the file's contents, stripped) and `checksum` (the SHA-256
of those contents, dbt's `FileHash.from_contents`), which dagster-dbt reads as the asset's code
version. So after such an edit, the manifest dbt would write differs from the one on disk in those
two fields of the edited nodes, and `follow_sql_edits` writes exactly that instead of starting dbt
(seconds of Python start-up and imports for a parse that would change nothing else).

It declines (the caller then runs `dbt parse`) unless every file that changed since the manifest was
prepared is a SQL model of the project whose node is in the manifest, its Jinja tokens (everything
but the template data, whitespace inside tags included) are exactly those of the node's `raw_code`,
and every one of its block tags leaves template data as plain output (`if`, `for`, `set x = ...`,
`do`): data captured by `{% set x %}...{% endset %}`, passed to a `{% call %}` (dbt's
`set_sql_header`), filtered or inside a `{% macro %}` can reach the node's config, so any other tag
declines. Added, removed or renamed files, YAML, macros, seeds, tests, a Python model or an
undecodable file decline too. After patching, every SQL model node of the project must carry the
checksum of its file as it is now, or it declines: a manifest rewritten by something else (a `dbt
build` run by hand in the project) is never trusted for a file it does not match.

What a reader could get wrong: this is not dbt's partial parse and reads no dbt state. dbt's own
`partial_parse.msgpack` stays as dbt left it, so the next real parse (the run's `dbt build`)
re-parses the edited file as it would have anyway. Environment variables the Jinja reads are not
part of the comparison, exactly as they are not part of the fingerprint (`project.py`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

log = logging.getLogger(__name__)

_OUTPUT_ONLY_TAGS = frozenset({"if", "elif", "else", "endif", "for", "endfor", "do", "set"})
_JINJA = jinja2.Environment(extensions=["jinja2.ext.do"])  # dbt's delimiters are Jinja's defaults
Shape = tuple[tuple[str, str], ...]


def jinja_shape(text: str) -> Shape | None:
    """Every Jinja token of `text` but its template data, or None when some data is not plain output
    (see the module docstring) or the text does not lex."""
    try:
        tokens = list(_JINJA.lex(text))
        _JINJA.parse(text)  # balanced: an unclosed tag or block is dbt's error to report
    except jinja2.TemplateSyntaxError:
        return None
    shape: list[tuple[str, str]] = []
    statement: list[tuple[str, str]] | None = None
    for _line, kind, value in tokens:
        if kind == "data":
            continue
        shape.append((kind, value))
        if kind == "block_begin":
            statement = []
        elif kind == "block_end":
            if not _leaves_data_as_output(statement or []):
                return None
            statement = None
        elif statement is not None and kind != "whitespace":
            statement.append((kind, value))
    return tuple(shape)


def _leaves_data_as_output(statement: list[tuple[str, str]]) -> bool:
    if not statement or statement[0][0] != "name" or statement[0][1] not in _OUTPUT_ONLY_TAGS:
        return False
    return statement[0][1] != "set" or ("operator", "=") in statement  # `{% set x %}` captures data


def dbt_checksum(contents: str) -> dict[str, str]:
    """A node's `checksum` as dbt computes it from the stripped file contents."""
    return {"name": "sha256", "checksum": hashlib.sha256(contents.encode("utf-8")).hexdigest()}


def _model_text(project_dir: Path, relative: str) -> str | None:
    try:
        return (project_dir / relative).read_bytes().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def follow_sql_edits(
    manifest: dict[str, Any], project_dir: Path, prepared: Mapping[str, str], current: Mapping[str, str]
) -> list[str] | None:
    """Patch `manifest` in place for the files whose digest differs between `prepared` (the source
    digests the manifest was prepared from) and `current`; returns the patched files, or None (the
    manifest untouched) when a `dbt parse` is needed."""
    if set(prepared) != set(current):
        return None  # a file added, removed or renamed
    changed = sorted(path for path, digest in current.items() if prepared[path] != digest)
    project_name = (manifest.get("metadata") or {}).get("project_name")
    ours = [
        node
        for node in (manifest.get("nodes") or {}).values()
        if node.get("resource_type") == "model"
        and node.get("language") == "sql"
        and node.get("package_name") == project_name
    ]
    models = {node.get("original_file_path"): node for node in ours}
    if not changed or not project_name or len(models) != len(ours):
        return None  # nothing to follow, or two nodes claim one file
    patched: dict[str, str] = {}
    for relative in changed:
        node = models.get(relative)
        text = _model_text(project_dir, relative) if node is not None else None
        if node is None or text is None:
            return None
        shape = jinja_shape(text)
        if shape is None or shape != jinja_shape(node.get("raw_code") or ""):
            return None
        patched[relative] = text
    for relative, node in models.items():  # every other SQL model node must match its file as it is now
        if relative in current and relative not in patched:
            text = _model_text(project_dir, relative)
            if text is None or node.get("checksum") != dbt_checksum(text):
                return None
    for relative, text in patched.items():
        models[relative]["raw_code"] = text
        models[relative]["checksum"] = dbt_checksum(text)
    return sorted(patched)


def read_manifest(path: Path) -> dict[str, Any] | None:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def write_manifest(path: Path, manifest: Mapping[str, Any]) -> None:
    """Replace `path` atomically (a reader sees the old manifest or the new one, never half)."""
    staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staged.write_text(json.dumps(manifest), encoding="utf-8")
    staged.replace(path)
