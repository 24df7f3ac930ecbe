"""The row predicate of a re-snapshot (``cdcctl changefeed snapshot --where``), checked.

The text reaches two servers inside a WHERE clause (the source's SELECT of each chunk,
the downstream's read of the rows to remove), so it must be one boolean expression over
the table's own columns and nothing else:

    text ──sqlglot (MySQL)──► one statement? no ';' and nothing after it
         ──cdc.filter.expr──► only columns of the table, literals, comparisons, AND/OR/NOT,
                              IN, BETWEEN, LIKE, IS, arithmetic and a few pure functions
                              (no subquery, no other table, no qualified name, no variable)
         ──top node──────────► a condition (a comparison, a connective, IN, ...), not a value
         ──render────────────► MySQL text with every identifier backquoted

Anything else is refused with one line naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from cdc.filter.expr import ExpressionError, compile_expression

__all__ = ["MAX_LENGTH", "PredicateError", "RowPredicate", "parse_predicate"]

#: The longest predicate taken (it travels in etcd and in every chunk's statements).
MAX_LENGTH = 2000

_CONDITIONS = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean, exp.Xor)


class PredicateError(ValueError):
    """The predicate cannot be used; the message says why, in one line."""


@dataclass(frozen=True)
class RowPredicate:
    """``text`` as given; ``sql`` the same condition rendered for MySQL/MariaDB."""

    text: str
    sql: str
    columns: tuple[str, ...]


def parse_predicate(text: str, columns: Sequence[str]) -> RowPredicate:
    """``text`` checked against the table's ``columns`` (see the module doc)."""
    if not isinstance(text, str) or not text.strip():
        raise PredicateError("--where: the predicate is empty; leave --where out for every row")
    if len(text) > MAX_LENGTH:
        raise PredicateError(
            f"--where: the predicate is {len(text)} characters long; at most {MAX_LENGTH}"
        )
    try:
        statements = [s for s in sqlglot.parse(text, read="mysql") if s is not None]
    except SqlglotError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PredicateError(f"--where: {text!r} is not valid SQL: {first}") from None
    semicolons = [
        t for t in sqlglot.tokenize(text, read="mysql") if t.token_type is TokenType.SEMICOLON
    ]
    if len(statements) != 1 or semicolons:
        raise PredicateError(
            f"--where: {text!r} holds more than one statement; give one condition, no ';'"
        )
    tree = statements[0]
    if tree.find(exp.Subquery, exp.Select, exp.Table) is not None:
        raise PredicateError(
            f"--where: {text!r} reads another table or has a subquery; only the table's own "
            "columns may appear"
        )
    try:
        compiled = compile_expression(text, columns)
    except ExpressionError as exc:
        raise PredicateError(f"--where: {exc}") from None
    node = tree.unnest() if isinstance(tree, exp.Paren) else tree
    if not isinstance(node, _CONDITIONS):
        raise PredicateError(
            f"--where: {text!r} is a value, not a condition; compare it, e.g. "
            "'id < 1000' or 'status IN (1, 2)'"
        )
    return RowPredicate(text, tree.sql(dialect="mysql", identify=True), compiled.columns)
