"""DuckDB's own lexer and parser, as `sql_guard` needs them: tokens with their text, statements.

`tokens()` takes where each token starts and its kind from `duckdb.tokenize` and cuts the token's
text out of the SQL; `statement_types()` asks DuckDB's parser (`extract_statements`) on a private,
locked-down connection.

What a reader could get wrong: `duckdb.tokenize` does not report comments, and when its lexer
gives up it silently returns one token for the rest of the text. So everything between two
reported tokens must be whitespace or comments, and a token's text must be a well-formed token of
its kind; anything else is refused (`lake.sql_unparsable`), never guessed at. DuckDB expands some
statements while parsing (IMPORT DATABASE reads files), hence the private connection with
external access off.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from dpone_dagster.errors import LakeError


class SqlGuardError(LakeError):
    code = "lake.sql_refused"


class UnparsableSqlError(SqlGuardError):
    code = "lake.sql_unparsable"


@dataclass(frozen=True)
class Token:
    kind: str  # identifier, numeric_const, string_const, operator, keyword (comments dropped)
    text: str

    @property
    def word(self) -> str:
        """An identifier or keyword as DuckDB matches it (quotes removed, case folded)."""
        if self.kind == "identifier" and self.text.startswith('"'):
            return self.text[1:-1].replace('""', '"').lower()
        return self.text.lower()

    @property
    def is_name(self) -> bool:
        return self.kind in ("identifier", "keyword")

    def is_op(self, text: str) -> bool:
        return self.kind == "operator" and self.text == text

    def plain_literal(self) -> str | None:
        """The value of a plain `'…'` literal; None for E'', $$…$$ or anything else."""
        if self.kind == "string_const" and len(self.text) >= 2 and self.text[0] == self.text[-1] == "'":
            return self.text[1:-1].replace("''", "'")
        return None

    def text_value(self) -> str | None:
        """The text a string literal or a quoted identifier stands for, as DuckDB reads it:
        `'…'`, `$tag$…$tag$` and `"…"` here, `E'…'` by DuckDB itself (its escapes are DuckDB's
        to define). None for anything else (numbers, names, `X''`/`B''` bit and blob literals)."""
        if self.kind == "identifier" and self.text.startswith('"'):
            return self.text[1:-1].replace('""', '"')
        if self.kind != "string_const":
            return None
        plain = self.plain_literal()
        if plain is not None:
            return plain
        if self.text.startswith("$"):
            tag_end = self.text.index("$", 1) + 1
            return self.text[tag_end : len(self.text) - tag_end]
        if self.text[:2].upper() == "E'":
            return _evaluate_literal(self.text)
        return None


def matching_paren(group: Sequence[Token], opening: int) -> int | None:
    """Index of the `)` closing the `(` at `group[opening]`; None when it is never closed."""
    depth = 0
    for position in range(opening, len(group)):
        if group[position].is_op("("):
            depth += 1
        elif group[position].is_op(")"):
            depth -= 1
            if depth == 0:
                return position
    return None


def _comments_only(text: str) -> bool:
    """True when `text` is whitespace, `-- …` line comments and (nested) `/* … */` comments."""
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline + 1
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while depth and i < len(text):
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            if depth:
                return False
        else:
            return False
    return True


def _quoted_end(text: str, start: int, quote: str, backslash: bool = False) -> int:
    i = start + 1
    while i < len(text):
        if backslash and text[i] == "\\":
            i += 2
        elif text[i] == quote:
            if text.startswith(quote * 2, i):
                i += 2
            else:
                return i + 1
        else:
            i += 1
    raise UnparsableSqlError("the SQL has an unterminated quoted string or identifier")


def _token_end(gap: str, kind: str) -> int:
    """Where DuckDB's token at the start of `gap` ends (the rest is whitespace and comments)."""
    if kind == "string_const":
        head = gap[:2].upper()
        if gap.startswith("'"):
            return _quoted_end(gap, 0, "'")
        if head in ("E'",):
            return _quoted_end(gap, 1, "'", backslash=True)
        if head in ("X'", "B'"):
            return _quoted_end(gap, 1, "'")
        if gap.startswith("$"):
            tag_end = gap.find("$", 1)
            close = gap.find(gap[: tag_end + 1], tag_end + 1) if tag_end > 0 else -1
            if close < 0:
                raise UnparsableSqlError("the SQL has an unterminated dollar-quoted string")
            return close + tag_end + 1
        raise UnparsableSqlError("the SQL uses a string literal form the guard does not accept")
    if kind == "identifier" and gap.startswith('"'):
        return _quoted_end(gap, 0, '"')
    end = len(gap)
    for marker in ("--", "/*"):
        found = gap.find(marker)
        if 0 < found < end:
            end = found
    for index, char in enumerate(gap[:end]):
        if char.isspace():
            return index
    return end


def tokens(sql: str) -> list[Token]:
    """DuckDB's own tokens of `sql` (its lexer reports where each starts; comments are skipped).
    Anything between tokens that is not whitespace or a comment is refused, so a token the
    lexer did not report can never hide from the rules."""
    raw = duckdb.tokenize(sql)
    starts = [start for start, _ in raw] + [len(sql)]
    if not _comments_only(sql[: starts[0]]):
        raise UnparsableSqlError("the SQL could not be tokenized by DuckDB")
    out: list[Token] = []
    for index, (start, kind) in enumerate(raw):
        gap = sql[start : starts[index + 1]]
        end = _token_end(gap, kind.name)
        if end <= 0 or not _comments_only(gap[end:]):
            raise UnparsableSqlError("the SQL could not be tokenized by DuckDB")
        if kind.name != "comment":
            out.append(Token(kind.name, gap[:end]))
    return out


def split_statements(toks: list[Token]) -> list[list[Token]]:
    groups: list[list[Token]] = [[]]
    for token in toks:
        if token.is_op(";"):
            groups.append([])
        else:
            groups[-1].append(token)
    return [group for group in groups if group]


_PARSER_LOCK = threading.Lock()
_PARSER: duckdb.DuckDBPyConnection | None = None


def _parser() -> duckdb.DuckDBPyConnection:
    global _PARSER
    if _PARSER is None:
        _PARSER = duckdb.connect(
            ":memory:",
            config={
                "enable_external_access": False,
                "autoload_known_extensions": False,
                "autoinstall_known_extensions": False,
                "lock_configuration": True,
            },
        )
    return _PARSER


def _evaluate_literal(text: str) -> str:
    """The value of one `E'…'` token (already cut by DuckDB's lexer, so nothing else runs)."""
    with _PARSER_LOCK:
        try:
            value = _parser().execute("SELECT " + text).fetchone()[0]
        except Exception:
            raise UnparsableSqlError("DuckDB could not read an E'' string literal; it is refused") from None
    if not isinstance(value, str):
        raise UnparsableSqlError("an E'' literal that is not text is refused")
    return value


def statement_types(sql: str) -> list[str]:
    """DuckDB's statement types for `sql`, parsed on a private connection with external access
    off (DuckDB expands some statements, e.g. IMPORT DATABASE, while parsing)."""
    with _PARSER_LOCK:
        try:
            return [statement.type.name for statement in _parser().extract_statements(sql)]
        except Exception:
            raise UnparsableSqlError("DuckDB could not parse the SQL; it is refused unchecked") from None
