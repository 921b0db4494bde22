"""The one reader of delivered SQL: flow and pre-hook files, checked at capture with DuckDB's own lexer and parser.

`flow_sql_writes(sql, where)` returns the relations a flow SQL file writes (lowercased, quotes
removed) or refuses the file. It reads the SQL the way the lake's guard does
(`dpone_dagster.lake.guard.lexer`: `duckdb.tokenize` for tokens, `extract_statements` for statement
types), never with a regex, so an `E'\\''` escape string, a `$q$…$q$` quote or a comment hides
nothing: what this module sees is what DuckDB will run. Everything is an ALLOWLIST:

- statements: DuckDB must parse one statement per `;`-separated group, of a type in
  `STATEMENT_TYPES`, starting with a word in `STATEMENT_HEADS`; `CREATE` only of a table, view or
  schema, `DROP` only of a table or view, `ALTER` only of a table and never `RENAME TO`
  (`flows.sql_statement_not_allowed`; ATTACH, COPY, INSTALL, LOAD, PRAGMA, SET, CALL, EXPORT,
  secrets, macros, ... fall outside);
- functions: every name followed by `(` that DuckDB knows as a function must be in
  `ALLOWED_FUNCTIONS` (scalar and aggregate functions a flow needs, and the row generators
  `range`, `generate_series`, `unnest`, `repeat`); any other known function (`read_text`,
  `read_csv`, `glob`, `query`, `parquet_scan`, ...) and any unknown name in call position is
  `flows.sql_function_not_allowed`;
- host files: a string literal where a table goes (`FROM '/etc/passwd'`) or a quoted name that
  looks like a path (`FROM "data.csv"`), both DuckDB replacement scans, is `flows.sql_host_access`.

What a reader could get wrong: this is the first line, not the only one. The synthetic runtime that
executes delivered SQL runs it on a DuckDB connection with external access off and only its own
lake directory allowed (`release.runtime.sandbox`), so a file write or read this reader missed
still fails there. Conversely, passing this reader grants nothing: development SQL never runs.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from dpone_dagster.contracts.flows import FlowError

if TYPE_CHECKING:
    from dpone_dagster.lake.guard.lexer import Token


class FlowSqlError(FlowError):
    """Refusals of the delivered-SQL reader that the flow capture did not have before it."""

    codes = {
        "flows.sql_function_not_allowed": (
            "A SQL file calls a function outside the flow allowlist (host-file table "
            "functions such as read_text, read_csv or glob, dynamic SQL, or a function "
            "DuckDB does not know)."
        ),
        "flows.sql_host_access": (
            "A SQL file names a file where a table goes (a string literal or a path-like quoted "
            "name after FROM/JOIN/USING), which would read the host's files."
        ),
    }


STATEMENT_TYPES = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "MERGE_INTO", "CREATE", "DROP", "ALTER", "TRANSACTION"}
)
"""DuckDB `StatementType` names a flow statement may parse to."""

STATEMENT_HEADS = frozenset(
    {"select", "with", "insert", "update", "delete", "merge", "truncate", "create", "drop", "alter", "begin", "commit"}
)
"""The first word of a flow statement (after any opening parentheses)."""

SAFE_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "repeat"})
"""The only table functions a flow may call: row generators that touch no file."""

ALLOWED_FUNCTIONS = SAFE_TABLE_FUNCTIONS | frozenset(
    """
    count sum avg mean min max any_value first last arg_min arg_max argmin argmax min_by max_by bool_and bool_or
    string_agg group_concat listagg list array_agg median mode quantile quantile_cont quantile_disc
    approx_count_distinct approx_quantile stddev stddev_pop stddev_samp variance var_pop var_samp corr covar_pop
    covar_samp product bit_and bit_or bit_xor count_if countif fsum
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value
    coalesce nullif ifnull if greatest least cast try_cast typeof
    date_trunc datetrunc date_part datepart extract date_diff datediff date_sub datesub date_add age epoch epoch_ms
    to_timestamp make_date make_time make_timestamp strftime strptime try_strptime year month day dayofweek
    dayofyear dayofmonth week weekofyear quarter hour minute second isodow isoyear yearweek last_day dayname
    monthname to_years to_months to_weeks to_days to_hours to_minutes to_seconds to_milliseconds to_microseconds
    time_bucket today current_date
    lower upper lcase ucase length len strlen trim ltrim rtrim substring substr left right replace concat
    concat_ws split_part string_split str_split lpad rpad reverse starts_with ends_with prefix suffix contains
    position instr strpos regexp_matches regexp_replace regexp_extract regexp_full_match format printf md5
    sha256 hash ascii chr translate
    abs round floor ceil ceiling trunc sqrt power pow exp ln log log10 log2 sign gcd lcm pi mod
    list_value list_contains list_has array_length cardinality list_sort list_distinct list_extract list_element
    array_extract struct_pack struct_extract row map list_transform list_filter filter list_concat array_concat
    list_slice array_slice flatten
    """.split()
)
"""Functions a flow may call; every other function DuckDB knows is refused (see the module docstring)."""

_RELATION_KEYWORDS = frozenset({"table", "into", "view", "exists", "references"})
_FROM_LIST_STARTS = frozenset({"from", "join", "using"})
_FROM_LIST_ENDS = frozenset(
    {"select", "where", "group", "having", "qualify", "window", "order", "limit", "offset", "union", "intersect",
     "except", "set", "values", "returning", "when", "then"}
)  # fmt: skip
_PATH_CHARACTERS = frozenset("./\\:*?~")
_FROM_GRAMMAR_FUNCTIONS = frozenset({"trim", "extract", "substring", "overlay"})


def flow_sql_writes(sql: str, where: str) -> frozenset[str]:
    """Relations `sql` writes; refuses (a `FlowError`) anything outside the allowlist (module docstring)."""
    from dpone_dagster.lake.guard.lexer import SqlGuardError, split_statements, statement_types, tokens

    try:
        groups = split_statements(tokens(sql))
        kinds = statement_types(sql)
    except SqlGuardError:
        raise FlowError("flows.sql_invalid", f"{where} is not SQL DuckDB can parse") from None
    if len(kinds) != len(groups):
        raise FlowError("flows.sql_statement_not_allowed", f"{where} holds a statement DuckDB expands into several")
    writes: set[str] = set()
    for group, kind in zip(groups, kinds, strict=True):
        head = _head(group)
        if kind not in STATEMENT_TYPES or head not in STATEMENT_HEADS:
            raise FlowError(
                "flows.sql_statement_not_allowed",
                f"{where} uses a {head.upper() or kind!r} statement, which flows may not run",
            )
        writes |= _statement_writes(group, head, where)
        _check_calls(group, where)
        _check_host_names(group, where)
    return frozenset(writes)


# ---------------------------------------------------------------------------------------------
# statements and their writes


def _head(group: Sequence[Token]) -> str:
    for token in group:
        if not token.is_op("("):
            return token.word if token.kind == "keyword" else ""
    return ""


def _statement_writes(group: Sequence[Token], head: str, where: str) -> set[str]:
    words = [token.word if token.kind == "keyword" else None for token in group]
    start = words.index(head)
    if head == "create":
        return _create_writes(group, start + 1, where)
    if head == "drop":
        return _drop_writes(group, start + 1, where)
    if head == "alter":
        if words[start + 1 : start + 2] != ["table"] or any(
            a == "rename" and b == "to" for a, b in zip(words, words[1:])
        ):
            raise FlowError("flows.sql_statement_not_allowed", f"{where} alters something other than a table's columns")
        return {_relation(group, _skip(words, start + 2, ("if", "exists")))}
    writes = set()
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else None
        if word == "insert":
            position = index + 3 if words[index + 1 : index + 3] in (["or", "replace"], ["or", "ignore"]) else index + 1
            if words[position : position + 1] == ["into"]:
                writes.add(_relation(group, position + 1))
        elif word == "merge" and following == "into" or word == "delete" and following == "from":
            writes.add(_relation(group, index + 2))
        elif word == "truncate":
            writes.add(_relation(group, index + 2 if following == "table" else index + 1))
        elif word == "update" and index + 1 < len(group) and group[index + 1].is_name and following != "set":
            writes.add(_relation(group, index + 1))
    return writes


def _create_writes(group: Sequence[Token], position: int, where: str) -> set[str]:
    words = [token.word if token.kind == "keyword" else None for token in group]
    position = _skip(words, position, ("or", "replace"))
    temporary = words[position] in ("temp", "temporary")
    position += temporary
    kind = words[position] if position < len(words) else None
    if kind == "schema":
        return set()
    if kind not in ("table", "view"):
        raise FlowError(
            "flows.sql_statement_not_allowed",
            f"{where} creates a {str(kind or 'thing').upper()}; flows create tables, views and schemas only",
        )
    relation = _relation(group, _skip(words, position + 1, ("if", "not", "exists")))
    return set() if temporary else {relation}


def _drop_writes(group: Sequence[Token], position: int, where: str) -> set[str]:
    words = [token.word if token.kind == "keyword" else None for token in group]
    if words[position : position + 1] not in (["table"], ["view"]):
        raise FlowError("flows.sql_statement_not_allowed", f"{where} drops something other than a table or view")
    return {_relation(group, _skip(words, position + 1, ("if", "exists")))}


def _skip(words: Sequence[str | None], position: int, optional: tuple[str, ...]) -> int:
    """Skip the optional keyword sequence `optional` at `position` (all of it or nothing)."""
    return position + len(optional) if tuple(words[position : position + len(optional)]) == optional else position


def _relation(group: Sequence[Token], position: int) -> str:
    """The (up to three-part) name starting at `position`, lowercased, quotes removed."""
    parts = []
    while position < len(group) and group[position].is_name:
        parts.append(group[position].word)
        if position + 2 < len(group) and group[position + 1].is_op(".") and len(parts) < 3:
            position += 2
        else:
            break
    if not parts:
        raise FlowError("flows.sql_invalid", "a write statement names no relation")
    return ".".join(parts)


# ---------------------------------------------------------------------------------------------
# call sites


def _check_calls(group: Sequence[Token], where: str) -> None:
    known = duckdb_function_names()
    for index, token in enumerate(group):
        if not token.is_name or index + 1 >= len(group) or not group[index + 1].is_op("("):
            continue
        name = token.word
        if name in ALLOWED_FUNCTIONS:
            continue
        if name in known:
            raise FlowSqlError("flows.sql_function_not_allowed", f"{where} calls {name}(), which flows may not call")
        if token.kind == "keyword" or _is_relation_or_alias(group, index):
            continue
        raise FlowSqlError("flows.sql_function_not_allowed", f"{where} calls {name}(), a function DuckDB does not know")


def _is_relation_or_alias(group: Sequence[Token], index: int) -> bool:
    """An unknown name before `(` that is a relation's column list, an alias's or a CTE's, not a call."""
    start = index
    while start >= 2 and group[start - 1].is_op(".") and group[start - 2].is_name:
        start -= 2
    before = group[start - 1] if start else None
    if before is not None and (
        before.kind == "identifier"
        or before.is_op(")")
        or (before.kind == "keyword" and before.word in _RELATION_KEYWORDS | {"as"})
    ):
        return True
    if before is None or not (before.is_op(",") or before.word in ("with", "recursive")):
        return False
    from dpone_dagster.lake.guard.lexer import matching_paren

    close = matching_paren(group, index + 1)
    return close is not None and close + 1 < len(group) and group[close + 1].word == "as"


def _check_host_names(group: Sequence[Token], where: str) -> None:
    """No string literal where a table goes, and no quoted name that looks like a file path."""
    depth = 0
    in_from_list: dict[int, bool] = {}
    grammar_call: dict[int, bool] = {}  # inside trim(… FROM …), extract(… FROM …): FROM starts no table list
    previous: Token | None = None
    for token in group:
        if token.is_op("("):
            depth += 1
            grammar_call[depth] = previous is not None and previous.is_name and previous.word in _FROM_GRAMMAR_FUNCTIONS
        elif token.is_op(")"):
            in_from_list.pop(depth, None)
            depth -= 1
        elif token.kind == "keyword" and token.word in _FROM_LIST_STARTS:
            in_from_list[depth] = not (token.word == "from" and grammar_call.get(depth, False))
        elif token.kind == "keyword" and token.word in _FROM_LIST_ENDS:
            in_from_list[depth] = False
        elif token.kind == "string_const" and previous is not None:
            after_keyword = (
                previous.kind == "keyword" and previous.word in _FROM_LIST_STARTS and in_from_list.get(depth, False)
            )
            if after_keyword or (previous.is_op(",") and in_from_list.get(depth, False)):
                raise FlowSqlError(
                    "flows.sql_host_access", f"{where} reads a file named by a string where a table goes"
                )
        elif token.kind == "identifier" and token.text.startswith('"') and _PATH_CHARACTERS & set(token.word):
            raise FlowSqlError("flows.sql_host_access", f"{where} uses a quoted name that looks like a file path")
        previous = token


_CATALOG_LOCK = threading.Lock()


@lru_cache(maxsize=1)
def duckdb_function_names() -> frozenset[str]:
    """Every function name DuckDB knows (any type), read once on a private locked-down connection."""
    import duckdb

    config = {
        "enable_external_access": False,
        "autoload_known_extensions": False,
        "autoinstall_known_extensions": False,
        "lock_configuration": True,
    }
    with _CATALOG_LOCK, duckdb.connect(":memory:", config=config) as conn:
        return frozenset(
            row[0].lower() for row in conn.execute("select distinct function_name from duckdb_functions()").fetchall()
        )
