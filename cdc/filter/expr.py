"""Row expressions for the event filter's ``ignore-*-value-expr`` rules, compiled once.

TiCDC evaluates these with TiDB's own expression engine; here::

    text --sqlglot (MySQL dialect)--> syntax tree --_Compiler--> tree of closures
    closures(row mapping) --> MySQL value (1 / 0 / None for predicates)

No ``eval``/``exec``: every node kind is translated by hand, and a node kind
the compiler does not know is rejected with :class:`ExpressionError` naming it
(subqueries, user variables, placeholders, CAST, CASE, REGEXP and functions
outside :data:`SUPPORTED_FUNCTIONS`). Value semantics (NULL, coercions,
collation) are MySQL's and live in :mod:`cdc.filter.sqlvalues`.

Supported syntax:

* comparisons ``= <=> != <> < <= > >=``; ``AND`` (``&&``), ``OR`` (``||``), ``XOR``,
  ``NOT`` (``!``), parentheses; ``IS [NOT] NULL``, ``IS [NOT] TRUE``,
  ``IS [NOT] FALSE``, ``IS [NOT] UNKNOWN``;
* ``[NOT] IN (list)``, ``[NOT] BETWEEN a AND b``, ``[NOT] LIKE p [ESCAPE 'c']``
  (``%`` any run, ``_`` one character, ``\\`` the escape unless ESCAPE names another);
* arithmetic ``+ - * / DIV % MOD`` and unary minus;
* literals: strings ('' or ""), integers, decimals (``1.5`` is DECIMAL),
  floats (``1e3`` is DOUBLE), ``NULL``, ``TRUE``, ``FALSE``, ``X'4142'``;
* functions ``ABS``, ``CHAR_LENGTH``, ``COALESCE``, ``CONCAT``, ``IFNULL``,
  ``LENGTH`` (bytes, as MySQL), ``LOWER``/``LCASE``, ``UPPER``/``UCASE``;
* columns by bare name, backquoted if needed (``\\`order\\` > 1``), matched
  case-insensitively; qualified names (``t.a``) are rejected.

Three-valued logic: a comparison with NULL is NULL, ``NULL AND 0`` is 0,
``NULL OR 1`` is 1, ``NOT NULL`` is NULL. A row is matched (and so ignored by
the event filter) only when the result is true: NULL never ignores a row.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from cdc.filter import sqlvalues
from cdc.filter.expr_errors import ExpressionError, UnknownColumnError
from cdc.filter.sqlvalues import compare, is_true

__all__ = [
    "SUPPORTED_FUNCTIONS",
    "ExpressionError",
    "RowExpression",
    "UnknownColumnError",
    "compile_expression",
]

SUPPORTED_FUNCTIONS = (
    "ABS",
    "CHAR_LENGTH",
    "COALESCE",
    "CONCAT",
    "IFNULL",
    "LCASE",
    "LENGTH",
    "LOWER",
    "UCASE",
    "UPPER",
)

_SUPPORTED_SYNTAX = (
    "supported: columns, literals, = <=> != <> < <= > >=, AND OR XOR NOT, "
    "IS [NOT] NULL/TRUE/FALSE, [NOT] IN (...), [NOT] BETWEEN, [NOT] LIKE [ESCAPE], "
    "+ - * / DIV %, and the functions " + ", ".join(SUPPORTED_FUNCTIONS)
)

Row = Mapping[str, Any]
Evaluator = Callable[[Row], Any]


class RowExpression:
    """A compiled boolean expression over one row; immutable and thread-safe."""

    def __init__(self, text: str, evaluator: Evaluator, columns: tuple[str, ...]) -> None:
        self.text = text
        self.columns = columns
        self._evaluator = evaluator

    def evaluate(self, row: Row) -> Any:
        """The expression's MySQL value for ``row`` (predicates give 1, 0 or None)."""
        try:
            return self._evaluator(row)
        except ExpressionError:
            raise
        except (TypeError, ArithmeticError) as exc:
            raise ExpressionError(f"cannot evaluate expression {self.text!r}: {exc}") from exc

    def matches(self, row: Row) -> bool:
        """True when the expression is true for ``row``; NULL and 0 are not a match."""
        return is_true(self.evaluate(row)) is True

    def check_columns(self, names: Iterable[str]) -> None:
        """Raise :class:`UnknownColumnError` if a column of the expression is not in ``names``."""
        known = list(names)
        lowered = {n.lower() for n in known}
        for column in self.columns:
            if column.lower() not in lowered:
                raise _unknown_column(self.text, column, known)

    def __repr__(self) -> str:
        return f"RowExpression({self.text!r})"


def _unknown_column(
    text: str, column: str, known: Iterable[str], owner: str = "the table"
) -> UnknownColumnError:
    listed = ", ".join(known) or "(none)"
    return UnknownColumnError(
        f"unknown column {column!r} in expression {text!r}; {owner} has the columns: {listed}",
        column,
    )


def compile_expression(text: str, columns: Iterable[str] | None = None) -> RowExpression:
    """Parse and compile ``text``; with ``columns`` unknown column names fail here already.

    Raises :class:`ExpressionError` (a ``ValueError``) for a syntax error or an
    unsupported construct, :class:`UnknownColumnError` for a column not in
    ``columns``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"an expression must be a non-empty SQL string, not {text!r}")
    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except ParseError as exc:
        detail = exc.errors[0] if exc.errors else {}
        where = f" at column {detail['col']}" if "col" in detail else ""
        reason = detail.get("description", str(exc))
        raise ExpressionError(f"cannot parse expression {text!r}{where}: {reason}") from None
    except SqlglotError as exc:
        raise ExpressionError(f"cannot parse expression {text!r}: {exc}") from None
    known = None if columns is None else list(columns)
    compiler = _Compiler(text, known)
    evaluator = compiler.compile(tree)
    return RowExpression(text, evaluator, tuple(compiler.referenced))


def _constant(value: Any) -> Evaluator:
    return lambda row: value


def _number_literal(token: str) -> int | Decimal | float:
    if re.fullmatch(r"\d+", token):
        return int(token)
    if "e" in token.lower():
        return float(token)
    return Decimal(token)


def _bool(value: bool | None) -> int | None:
    return None if value is None else int(value)


_COMPARISONS: dict[type[exp.Expr], Callable[[int], bool]] = {
    exp.EQ: lambda c: c == 0,
    exp.NEQ: lambda c: c != 0,
    exp.LT: lambda c: c < 0,
    exp.LTE: lambda c: c <= 0,
    exp.GT: lambda c: c > 0,
    exp.GTE: lambda c: c >= 0,
}

_ARITHMETIC: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.IntDiv: "DIV",
    exp.Mod: "%",
}


class _Compiler:
    """Turns one sqlglot tree into closures; records the columns it references."""

    def __init__(self, text: str, columns: list[str] | None) -> None:
        self.text = text
        self.columns = columns
        self.by_lower = None if columns is None else {c.lower(): c for c in columns}
        self.referenced: list[str] = []

    def fail(self, node: exp.Expr, what: str) -> ExpressionError:
        snippet = node.sql(dialect="mysql")
        if len(snippet) > 80:
            snippet = snippet[:77] + "..."
        return ExpressionError(
            f"unsupported {what} in expression {self.text!r}: {snippet}; {_SUPPORTED_SYNTAX}"
        )

    def compile(self, node: exp.Expr) -> Evaluator:
        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.HexString):
            return _constant(self.literal(node))
        if type(node) in _COMPARISONS:
            return self.comparison(node, _COMPARISONS[type(node)])
        if isinstance(node, exp.NullSafeEQ):
            return self.null_safe_eq(node)
        if isinstance(node, exp.And | exp.Or | exp.Xor):
            return self.logic(node)
        if isinstance(node, exp.Not):
            return self.negation(node)
        if isinstance(node, exp.Is):
            return self.is_test(node)
        if isinstance(node, exp.In):
            return self.in_list(node)
        if isinstance(node, exp.Between):
            return self.between(node)
        if isinstance(node, exp.Like | exp.Escape):
            return self.like(node)
        if type(node) in _ARITHMETIC:
            return self.arithmetic(node, _ARITHMETIC[type(node)])
        if isinstance(node, exp.Neg):
            operand = self.compile(node.this)
            return lambda row: sqlvalues.negate(operand(row))
        special = self.describe(node)
        if special is None and isinstance(node, exp.Func):
            return self.function(node)
        raise self.fail(node, special or f"construct ({node.key})")

    def describe(self, node: exp.Expr) -> str | None:
        """A readable name for node kinds rejected as a whole; None for the rest."""
        if isinstance(node, exp.Subquery | exp.Select | exp.Exists | exp.Union | exp.Any):
            return "subquery"
        if isinstance(node, exp.Block):
            return "multiple statements"
        if isinstance(node, exp.Alias):
            return "alias or trailing text"
        if isinstance(node, exp.Placeholder):
            return "placeholder"
        if isinstance(node, exp.Parameter):
            return "variable"
        if isinstance(node, exp.Star):
            return "'*'"
        if isinstance(node, exp.Collate):
            return "COLLATE"
        if isinstance(node, exp.Cast):
            return "CAST"
        if isinstance(node, exp.Case):
            return "CASE expression"
        return None

    def column(self, node: exp.Column) -> Evaluator:
        if node.table or not isinstance(node.this, exp.Identifier):
            raise self.fail(node, "qualified column name (use the bare column name)")
        name = node.name
        if name.lower() not in {r.lower() for r in self.referenced}:
            self.referenced.append(name)
        key = name
        if self.by_lower is not None:
            if name.lower() not in self.by_lower:
                raise _unknown_column(self.text, name, self.columns or ())
            key = self.by_lower[name.lower()]
        return _column_getter(self.text, name, key)

    def literal(self, node: exp.Expr) -> Any:
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Boolean):
            return int(bool(node.this))
        if isinstance(node, exp.HexString):
            digits = str(node.this)
            return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        assert isinstance(node, exp.Literal)
        if node.is_string:
            return str(node.this)
        return _number_literal(str(node.this))

    def operands(self, node: exp.Expr) -> tuple[Evaluator, Evaluator]:
        return self.compile(node.this), self.compile(node.expression)

    def comparison(self, node: exp.Expr, test: Callable[[int], bool]) -> Evaluator:
        left, right = self.operands(node)

        def evaluate(row: Row) -> int | None:
            order = compare(left(row), right(row))
            return None if order is None else int(test(order))

        return evaluate

    def null_safe_eq(self, node: exp.Expr) -> Evaluator:
        left, right = self.operands(node)

        def evaluate(row: Row) -> int:
            a, b = left(row), right(row)
            if a is None or b is None:
                return int(a is None and b is None)
            return int(compare(a, b) == 0)

        return evaluate

    def logic(self, node: exp.Expr) -> Evaluator:
        left, right = self.operands(node)
        if isinstance(node, exp.And):

            def evaluate_and(row: Row) -> int | None:
                a = is_true(left(row))
                if a is False:
                    return 0
                b = is_true(right(row))
                if b is False:
                    return 0
                return None if a is None or b is None else 1

            return evaluate_and
        if isinstance(node, exp.Or):

            def evaluate_or(row: Row) -> int | None:
                a = is_true(left(row))
                if a is True:
                    return 1
                b = is_true(right(row))
                if b is True:
                    return 1
                return None if a is None or b is None else 0

            return evaluate_or

        def evaluate_xor(row: Row) -> int | None:
            a, b = is_true(left(row)), is_true(right(row))
            return None if a is None or b is None else int(a != b)

        return evaluate_xor

    def negation(self, node: exp.Not) -> Evaluator:
        operand = self.compile(node.this)

        def evaluate(row: Row) -> int | None:
            value = is_true(operand(row))
            return None if value is None else int(not value)

        return evaluate

    def is_test(self, node: exp.Is) -> Evaluator:
        operand = self.compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return lambda row: int(operand(row) is None)
        if isinstance(target, exp.Boolean):
            wanted = bool(target.this)
            return lambda row: int(is_true(operand(row)) is wanted)
        raise self.fail(node, "IS test (only IS [NOT] NULL/TRUE/FALSE/UNKNOWN)")

    def in_list(self, node: exp.In) -> Evaluator:
        if node.args.get("query") is not None or node.args.get("unnest") is not None:
            raise self.fail(node, "subquery")
        if node.args.get("field") is not None or not node.expressions:
            raise self.fail(node, "IN form (only IN (value, ...))")
        needle = self.compile(node.this)
        items = [self.compile(item) for item in node.expressions]

        def evaluate(row: Row) -> int | None:
            value = needle(row)
            if value is None:
                return None
            saw_null = False
            for item in items:
                order = compare(value, item(row))
                if order == 0:
                    return 1
                saw_null = saw_null or order is None
            return None if saw_null else 0

        return evaluate

    def between(self, node: exp.Between) -> Evaluator:
        if node.args.get("symmetric"):
            raise self.fail(node, "BETWEEN SYMMETRIC")
        value_of = self.compile(node.this)
        low_of, high_of = self.compile(node.args["low"]), self.compile(node.args["high"])

        def evaluate(row: Row) -> int | None:
            value = value_of(row)
            above, below = compare(value, low_of(row)), compare(value, high_of(row))
            above_ok = None if above is None else above >= 0
            below_ok = None if below is None else below <= 0
            if above_ok is False or below_ok is False:
                return 0
            return None if above_ok is None or below_ok is None else 1

        return evaluate

    def like(self, node: exp.Expr) -> Evaluator:
        escape = "\\"
        like_node = node
        if isinstance(node, exp.Escape):
            like_node = node.this
            escape = self.escape_char(node.expression)
        if not isinstance(like_node, exp.Like):
            raise self.fail(node, "ESCAPE without LIKE")
        value_of, pattern_of = self.operands(like_node)
        negated = bool(like_node.args.get("negate"))

        def evaluate(row: Row) -> int | None:
            matched = sqlvalues.like(value_of(row), pattern_of(row), escape)
            if matched is None or not negated:
                return matched
            return 1 - matched

        return evaluate

    def escape_char(self, node: exp.Expr) -> str:
        if not (isinstance(node, exp.Literal) and node.is_string) or len(str(node.this)) > 1:
            raise self.fail(node, "ESCAPE value (it must be one character in quotes, e.g. '!')")
        # An empty ESCAPE '' keeps the backslash, as MySQL does without NO_BACKSLASH_ESCAPES.
        return str(node.this) or "\\"

    def arithmetic(self, node: exp.Expr, operator: str) -> Evaluator:
        left, right = self.operands(node)
        return lambda row: sqlvalues.arithmetic(operator, left(row), right(row))

    def function(self, node: exp.Func) -> Evaluator:
        if isinstance(node, exp.Lower | exp.Upper):
            operand = self.compile(node.this)
            upper = isinstance(node, exp.Upper)
            return lambda row: _change_case(operand(row), upper)
        if isinstance(node, exp.Length):
            operand = self.compile(node.this)
            in_bytes = bool(node.args.get("binary"))
            return lambda row: _length(operand(row), in_bytes)
        if isinstance(node, exp.Abs):
            operand = self.compile(node.this)
            return lambda row: _absolute(operand(row))
        if isinstance(node, exp.Coalesce):
            parts = [self.compile(node.this), *(self.compile(e) for e in node.expressions)]
            return lambda row: next((v for v in (p(row) for p in parts) if v is not None), None)
        if isinstance(node, exp.Concat):
            parts = [self.compile(e) for e in node.expressions]
            return lambda row: sqlvalues.concat([p(row) for p in parts])
        name = node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name()
        raise self.fail(node, f"function {name}()")


def _column_getter(text: str, name: str, key: str) -> Evaluator:
    lowered = name.lower()
    resolved = key

    def get(row: Row) -> Any:
        nonlocal resolved
        try:
            return row[resolved]
        except KeyError:
            pass
        for candidate in row:
            if isinstance(candidate, str) and candidate.lower() == lowered:
                resolved = candidate
                return row[candidate]
        raise _unknown_column(text, name, [str(k) for k in row], "the row")

    return get


def _change_case(value: Any, upper: bool) -> Any:
    text = sqlvalues.to_text(value)
    if text is None or isinstance(text, bytes):
        return text
    return text.upper() if upper else text.lower()


def _length(value: Any, in_bytes: bool) -> int | None:
    text = sqlvalues.to_text(value)
    if text is None:
        return None
    if isinstance(text, bytes):
        return len(text)
    return len(text.encode()) if in_bytes else len(text)


def _absolute(value: Any) -> Any:
    number = sqlvalues.to_number(value)
    return None if number is None else abs(number)
