"""`transform_user_sql`: raw user SQL that attaches a DuckLake goes through the fork redirect too.

In fork mode every `ATTACH … 'ducklake:<catalog>' …` (or `(TYPE ducklake)`) in user SQL is
rewritten: when it names the lake's own catalog (the parent's, as cloned into the fork's settings,
or the fork's own), the catalog becomes the fork's, `METADATA_SCHEMA`, `DATA_PATH` and
`OVERRIDE_DATA_PATH` are removed wherever they appear and in any letter case, and the fork's own
values are appended last. Any other DuckLake attach is refused: in a fork, a DuckLake is reached
through `resolve()` or not at all. Outside fork mode the SQL is returned unchanged.

What a reader could get wrong: the scan skips string literals, quoted identifiers and comments, so
the word ATTACH inside a string is left alone; and DuckDB keeps the *last* duplicate of an option,
so a user option after ours would win — that is why reserved options are stripped, not overridden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dpone_dagster.errors import LakeError
from dpone_dagster.lake.attach import FORK_RESERVED_OPTIONS
from dpone_dagster.lake.resolve import ResolvedLake
from dpone_dagster.lake.sql import sql_string

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"[+-]?[0-9][0-9.eE+-]*")


class UnmanagedAttachError(LakeError):
    code = "lake.unmanaged_attach"


class UserSqlSyntaxError(LakeError):
    code = "lake.user_sql_unparsable"


@dataclass(frozen=True)
class Token:
    kind: str  # word, string, ident, number, punct
    text: str
    start: int
    end: int

    @property
    def upper(self) -> str:
        return self.text.upper()


def _quoted_end(sql: str, start: int, quote: str) -> int:
    i = start + 1
    while True:
        j = sql.find(quote, i)
        if j < 0:
            raise UserSqlSyntaxError("user SQL has an unterminated quoted string or identifier")
        if sql.startswith(quote * 2, j):
            i = j + 2
            continue
        return j + 1


def tokens(sql: str) -> list[Token]:
    """Tokens outside comments; string literals and quoted identifiers are single tokens."""
    out: list[Token] = []
    i = 0
    while i < len(sql):
        ch = sql[i]
        if ch.isspace():
            i += 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            if end < 0:
                raise UserSqlSyntaxError("user SQL has an unterminated block comment")
            i = end + 2
        elif ch in "'\"":
            end = _quoted_end(sql, i, ch)
            out.append(Token("string" if ch == "'" else "ident", sql[i:end], i, end))
            i = end
        elif match := _WORD.match(sql, i):
            out.append(Token("word", match.group(), i, match.end()))
            i = match.end()
        elif match := _NUMBER.match(sql, i):
            out.append(Token("number", match.group(), i, match.end()))
            i = match.end()
        else:
            out.append(Token("punct", ch, i, i + 1))
            i += 1
    return out


def _literal(token: Token) -> str:
    return token.text[1:-1].replace("''", "'")


@dataclass(frozen=True)
class AttachClause:
    """One user ATTACH: its path literal token, the option list span, and the parsed options."""

    path: Token
    options: list[tuple[str, str]]  # (NAME, raw value text or "")
    options_span: tuple[int, int] | None  # span of "( … )" in the SQL, or None
    insert_at: int  # where an option list goes when there is none
    is_ducklake: bool


def _parse_options(toks: list[Token], i: int) -> tuple[list[tuple[str, str]], int]:
    """Parse `( NAME [value], … )` starting at the `(` token; returns options and the `)` index."""
    options: list[tuple[str, str]] = []
    i += 1
    while i < len(toks) and toks[i].text != ")":
        if toks[i].kind not in ("word", "ident"):
            raise UserSqlSyntaxError("an ATTACH option list could not be read")
        name = toks[i].text.strip('"').upper()
        i += 1
        value_tokens: list[Token] = []
        depth = 0
        while i < len(toks) and not (depth == 0 and toks[i].text in (",", ")")):
            depth += {"(": 1, ")": -1}.get(toks[i].text, 0)
            value_tokens.append(toks[i])
            i += 1
        value = "" if not value_tokens else " ".join(t.text for t in value_tokens)
        options.append((name, value))
        if i < len(toks) and toks[i].text == ",":
            i += 1
    if i >= len(toks):
        raise UserSqlSyntaxError("an ATTACH option list is not closed")
    return options, i


def attach_clauses(sql: str) -> list[AttachClause]:
    toks = tokens(sql)
    found: list[AttachClause] = []
    for index, token in enumerate(toks):
        if token.kind != "word" or token.upper != "ATTACH":
            continue
        if index > 0 and toks[index - 1].text not in (";",):
            continue
        i = index + 1
        while i < len(toks) and toks[i].upper in ("OR", "REPLACE", "IF", "NOT", "EXISTS", "DATABASE"):
            i += 1
        if i >= len(toks) or toks[i].kind != "string":
            continue
        path = toks[i]
        i += 1
        insert_at = path.end
        if i < len(toks) and toks[i].upper == "AS":
            insert_at = toks[i + 1].end if i + 1 < len(toks) else toks[i].end
            i += 2
        options: list[tuple[str, str]] = []
        span = None
        if i < len(toks) and toks[i].text == "(":
            options, close = _parse_options(toks, i)
            span = (toks[i].start, toks[close].end)
        is_ducklake = _literal(path).lower().startswith("ducklake:") or any(
            name == "TYPE" and value.strip("'\"").lower() == "ducklake" for name, value in options
        )
        found.append(AttachClause(path, options, span, insert_at, is_ducklake))
    return found


def _same_catalog(resolved: ResolvedLake, catalog_text: str) -> bool:
    text = catalog_text.removeprefix("ducklake:")
    candidates = {resolved.catalog, resolved.base_catalog}
    for location in candidates:
        if location.kind == "duckdb":
            if not text.lower().startswith(("postgres:", "postgresql:", "sqlite:", "mysql:")):
                if Path(text).expanduser().resolve() == Path(location.target).resolve():
                    return True
        elif location.kind == "postgres":
            kind, _, body = text.partition(":")
            if kind.lower() in ("postgres", "postgresql") and _libpq_equal(body, location.target):
                return True
    return False


def _libpq_equal(a: str, b: str) -> bool:
    from psycopg.conninfo import conninfo_to_dict

    try:
        left, right = conninfo_to_dict(a), conninfo_to_dict(b)
    except Exception:
        return False
    left.pop("password", None)
    right.pop("password", None)
    return left == right


def transform_user_sql(resolved: ResolvedLake, sql: str) -> str:
    """Rewrite DuckLake ATTACHes in user SQL so no managed path reaches a parent namespace."""
    if not resolved.fork_mode:
        return sql
    edits: list[tuple[int, int, str]] = []
    for clause in attach_clauses(sql):
        if not clause.is_ducklake:
            continue
        if not _same_catalog(resolved, _literal(clause.path)):
            raise UnmanagedAttachError(
                f"user SQL attaches a DuckLake other than lake {resolved.lake!r}; in a fork, "
                "DuckLakes are attached only through the workspace's resolution"
            )
        kept = [(n, v) for n, v in clause.options if n not in FORK_RESERVED_OPTIONS]
        ours = [("DATA_PATH", sql_string(resolved.data_path))]
        if resolved.catalog.kind == "postgres":
            ours.append(("METADATA_SCHEMA", sql_string(resolved.namespace)))
        rendered = ", ".join(f"{n} {v}".rstrip() for n, v in [*kept, *ours])
        if resolved.catalog.kind == "duckdb":
            scheme = "ducklake:" if _literal(clause.path).lower().startswith("ducklake:") else ""
            new_path = sql_string(scheme + resolved.catalog.target)
            edits.append((clause.path.start, clause.path.end, new_path))
        if clause.options_span:
            edits.append((clause.options_span[0], clause.options_span[1], f"({rendered})"))
        else:
            edits.append((clause.insert_at, clause.insert_at, f" ({rendered})"))
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql
