"""The statements that name files: `COPY … TO`, `EXPORT DATABASE`, persistent secrets, and paths read by name.

`check_file_tokens(group, files)` looks at one statement's tokens (DuckDB's lexer, see `lexer.py`)
wherever `COPY` or `EXPORT` occurs in it (also after `PREPARE … AS` or `EXPLAIN ANALYZE`):
- `COPY <relation|(query)> TO <target> [(options)|WITH (options)]`: the target must be one string
  literal (`'…'`, `$$…$$`, `E'…'`, read as DuckDB reads it) or quoted identifier — DuckDB also
  accepts an expression or a `?` parameter there, which cannot be proven and is refused — and it
  must be inside the connection's write roots (`paths.FileRules`); `FILENAME_PATTERN` and
  `FILE_EXTENSION` may not leave the target folder (`..`, `/`);
- `EXPORT DATABASE [<db> TO] <target> [(options)]`: the same;
- `CREATE|DROP PERSISTENT SECRET` (and `… SECRET … IN <storage>`): a file in the secret directory.
`check_read_tokens` refuses every string literal or quoted identifier that names a database file
(`.duckdb`, `.db`, `.ducklake`, …: DuckDB opens them by path in `FROM 'x.db'`), and expands the
ones in a position DuckDB reads as a file (`FROM`/`JOIN`/`COPY … FROM`) onto the disk.

What a reader could get wrong: `COPY FROM DATABASE a TO b` copies between attached databases (no
file); what it may write is ruled by the metadata-catalog rule in `checker.py` and by DuckDB's
READ_ONLY attach of ancestors, not here. Column values cannot escape a `PARTITION_BY` folder: DuckDB
percent-encodes `/` in hive partition names (measured on 1.5.5).
"""

from __future__ import annotations

from dpone_dagster.lake.guard.lexer import Token, matching_paren
from dpone_dagster.lake.guard.paths import (
    FileRules,
    FileWriteOutsideNamespaceError,
    ForeignDatabaseError,
    safe_file_name_part,
)

FILE_NAME_OPTIONS = frozenset({"filename_pattern", "file_extension"})
_READ_POSITION_WORDS = frozenset({"from", "join"})


def _keyword(token: Token, word: str) -> bool:
    return token.kind == "keyword" and token.word == word


def _target(group: list[Token], index: int, files: FileRules, what: str) -> None:
    """`group[index]` is the target of a file write; what follows it is options or the end."""
    if index >= len(group) or group[index].text_value() is None:
        raise FileWriteOutsideNamespaceError(
            f"{what} must name its file as one string literal; an expression or parameter cannot be proven safe"
        )
    files.check_write(group[index].text_value(), what)
    rest = group[index + 1 :]
    if rest and _keyword(rest[0], "with"):
        rest = rest[1:]
    if not rest:
        return
    if not rest[0].is_op("(") or matching_paren(rest, 0) != len(rest) - 1:
        raise FileWriteOutsideNamespaceError(f"{what}: only an option list may follow the file name")
    for position, token in enumerate(rest):
        if token.is_name and token.word in FILE_NAME_OPTIONS:
            value = rest[position + 1].text_value() if position + 1 < len(rest) else None
            if value is None:
                raise FileWriteOutsideNamespaceError(f"{token.word.upper()} must be a string literal")
            safe_file_name_part(value, token.word.upper())


def _copy(group: list[Token], start: int, files: FileRules) -> None:
    """`group[start]` is COPY: find its TO (outside parentheses) and rule the target."""
    index = start + 1
    if index + 1 < len(group) and _keyword(group[index], "from") and group[index + 1].word == "database":
        return
    while index < len(group):
        token = group[index]
        if token.is_op("("):
            close = matching_paren(group, index)
            index = len(group) if close is None else close + 1
            continue
        if _keyword(token, "to"):
            _target(group, index + 1, files, "COPY … TO")
            return
        if _keyword(token, "from"):
            return
        index += 1


def _export(group: list[Token], start: int, files: FileRules) -> None:
    index = start + 1
    if index >= len(group) or group[index].word != "database":
        return  # not EXPORT DATABASE (a column named export, say)
    index += 1
    if index < len(group) and group[index].kind != "string_const":
        index += 1  # the database name
        if index >= len(group) or not _keyword(group[index], "to"):
            raise FileWriteOutsideNamespaceError("EXPORT DATABASE must name its folder as a string literal")
        index += 1
    _target(group, index, files, "EXPORT DATABASE")


def _persistent_secret(group: list[Token], start: int) -> None:
    words = []
    for token in group[start + 1 :]:
        if token.is_op("("):
            break
        words.append(token.word)
    if "secret" in words and ("persistent" in words or "in" in words):
        raise FileWriteOutsideNamespaceError("persistent secrets are files outside the lake; they are refused")


def check_file_tokens(group: list[Token], files: FileRules) -> None:
    """Refuse a file write in one statement's tokens unless `files` allows its target."""
    for index, token in enumerate(group):
        if token.kind != "keyword":
            continue
        if token.word == "copy":
            _copy(group, index, files)
        elif token.word == "export":
            _export(group, index, files)
        elif token.word in ("create", "drop"):
            _persistent_secret(group, index)


def check_read_tokens(group: list[Token], files: FileRules) -> None:
    """Refuse any literal naming a database file; expand those DuckDB reads as a file by name."""
    for index, token in enumerate(group):
        if token.kind != "string_const" and not (token.kind == "identifier" and token.text.startswith('"')):
            continue
        value = token.text_value()
        if value is None:
            continue
        previous = group[index - 1] if index else None
        following = group[index + 1] if index + 1 < len(group) else None
        in_read_position = (
            previous is not None and previous.kind == "keyword" and previous.word in _READ_POSITION_WORDS
            and not (following is not None and following.is_op("."))  # `FROM "lake"."schema"."t"`: a name
        )  # fmt: skip
        files.check_read(value, expand=in_read_position)


def check_read_arguments(name: str, args: list[Token], files: FileRules) -> None:
    """`name(` is a file-reading table function; `args` follow its `(`: the first argument must be a
    literal path or a list of literal paths, each clear of database files."""
    if args and args[0].is_op("["):
        end = next((i for i, t in enumerate(args) if t.is_op("]")), len(args))
        items = [t for t in args[1:end] if not t.is_op(",")]
    else:
        items = args[:1]
    if not items or any(t.text_value() is None or t.kind != "string_const" for t in items):
        raise ForeignDatabaseError(f"{name}() must name its files as string literals here")
    for item in items:
        files.check_read(item.text_value(), expand=True)
