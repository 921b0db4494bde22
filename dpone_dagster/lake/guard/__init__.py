"""The SQL guard: DuckDB's own parser and lexer decide what user SQL may do.

`connection.py` wraps what user code gets.
"""
