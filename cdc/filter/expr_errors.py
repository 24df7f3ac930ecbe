"""The errors of row expressions (``cdc.filter.expr``), apart from their compiler.

The event filter catches them on every row it evaluates; importing them from here
lets it (and the configuration that builds it, which every ``cdcctl`` command reads)
leave the SQL parser unimported until a rule has an expression to compile.
"""

from __future__ import annotations

__all__ = ["ExpressionError", "UnknownColumnError"]


class ExpressionError(ValueError):
    """An expression cannot be compiled, or cannot be evaluated on a row."""


class UnknownColumnError(ExpressionError):
    """The expression names a column the table (or the row) does not have."""

    def __init__(self, message: str, column: str) -> None:
        super().__init__(message)
        self.column = column
