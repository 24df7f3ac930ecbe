"""Reading statement structure from words, and handing the pieces to sqlglot.

A :class:`Cursor` walks the words of one statement (``dialect.tokenize``);
helpers split lists at top-level commas and parse fragments (a CREATE TABLE
element list, a key part list, one ALTER clause) with sqlglot, wrapped in a
synthetic statement about a placeholder table ``_t`` so that the real name's
spelling never matters to sqlglot.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from cdc.model import TableName
from cdc.schema.columns import ColumnSpec, canonical_charset, column_spec, key_column
from cdc.schema.dialect import BinlogMySQL, DdlSyntaxError, Word

__all__ = [
    "Cursor",
    "closing_paren",
    "key_list",
    "key_parts",
    "parse_sql",
    "quote_name",
    "read_elements",
    "split_top_level",
    "table_charset",
    "unique_parts",
    "upper_at",
]


class Cursor:
    """Walks the words of one statement; ``sql`` is the text the words point into."""

    def __init__(self, words: list[Word], sql: str, default_schema: str) -> None:
        end = next((i for i, w in enumerate(words) if w.upper == ";"), len(words))
        self.words = words[:end]
        self.sql = sql
        self.default_schema = default_schema
        self.i = 0

    def peek(self, k: int = 0) -> str:
        """The keyword spelling of the word ``k`` ahead; '' past the end."""
        j = self.i + k
        return self.words[j].upper if 0 <= j < len(self.words) else ""

    def at_end(self) -> bool:
        return self.i >= len(self.words)

    def accept(self, *seq: str) -> bool:
        """Step over ``seq`` if the next words are exactly it."""
        if all(self.peek(k) == word for k, word in enumerate(seq)):
            self.i += len(seq)
            return True
        return False

    def expect(self, *seq: str) -> None:
        if not self.accept(*seq):
            found = " ".join(w.text for w in self.words[self.i : self.i + 3]) or "end of statement"
            raise DdlSyntaxError(f"expected {' '.join(seq)}, found {found!r}")

    def name(self) -> str:
        if self.at_end() or not self.words[self.i].is_name:
            found = self.words[self.i].text if not self.at_end() else "end of statement"
            raise DdlSyntaxError(f"expected a name, found {found!r}")
        self.i += 1
        return self.words[self.i - 1].text

    def table(self) -> TableName:
        """``[schema.]table``, qualified with the default schema when unqualified."""
        first = self.name()
        if self.peek() == "." and self.i + 1 < len(self.words) and self.words[self.i + 1].is_name:
            self.i += 1
            return TableName(first, self.name())
        if not self.default_schema:
            raise DdlSyntaxError(f"table {first!r} is unqualified and no database is selected")
        return TableName(self.default_schema, first)

    def table_list(self) -> list[TableName]:
        tables = [self.table()]
        while self.accept(","):
            tables.append(self.table())
        return tables

    def rest(self) -> list[Word]:
        """All remaining words (the cursor moves to the end)."""
        words = self.words[self.i :]
        self.i = len(self.words)
        return words

    def text(self, words: list[Word]) -> str:
        """The statement text the words span, comments and spacing included."""
        return self.sql[words[0].start : words[-1].end + 1] if words else ""


def split_top_level(words: list[Word]) -> list[list[Word]]:
    """Split at top-level commas (parentheses nest)."""
    parts: list[list[Word]] = [[]]
    depth = 0
    for word in words:
        if word.upper == "(":
            depth += 1
        elif word.upper == ")":
            depth -= 1
        if word.upper == "," and depth == 0:
            parts.append([])
        else:
            parts[-1].append(word)
    return [part for part in parts if part]


def closing_paren(words: list[Word], i: int) -> int:
    """Index of the ``)`` matching the ``(`` at ``words[i]``."""
    depth = 0
    for j in range(i, len(words)):
        if words[j].upper == "(":
            depth += 1
        elif words[j].upper == ")":
            depth -= 1
            if depth == 0:
                return j
    raise DdlSyntaxError("unbalanced parentheses")


def parse_sql(sql: str) -> exp.Expr:
    """sqlglot's tree of ``sql``; :class:`DdlSyntaxError` when it cannot, or only as a command."""
    try:
        tree = sqlglot.parse_one(sql, dialect=BinlogMySQL)
    except (ParseError, TokenError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DdlSyntaxError(f"sqlglot cannot parse {sql!r}: {first}") from None
    if tree is None or isinstance(tree, exp.Command):
        raise DdlSyntaxError(f"sqlglot cannot parse {sql!r}")
    return tree


def quote_name(name: str) -> str:
    """``name`` in backquotes, inner backquotes doubled."""
    return "`" + name.replace("`", "``") + "`"


_SKIPPED_ELEMENTS = ("INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK")


def is_schema_element(part: list[Word]) -> bool:
    """Columns and PRIMARY/UNIQUE keys shape the schema; other indexes and constraints don't."""
    first = part[0].upper
    if first == "CONSTRAINT":
        following = [w.upper for w in part[1:3]]
        return "PRIMARY" in following or "UNIQUE" in following
    if first == "PERIOD" and len(part) > 1 and part[1].upper == "FOR":
        return False
    return first not in _SKIPPED_ELEMENTS


def read_elements(
    c: Cursor, words: list[Word]
) -> tuple[tuple[ColumnSpec, ...], tuple[str, ...], tuple[tuple[str, ...], ...]]:
    """Columns, primary key and unique keys (definition order) of a CREATE TABLE element list."""
    kept = [c.text(part) for part in split_top_level(words) if is_schema_element(part)]
    if not kept:
        raise DdlSyntaxError("CREATE TABLE without columns")
    tree = parse_sql(f"CREATE TABLE _t ({', '.join(kept)})")
    schema = tree.this
    if not isinstance(schema, exp.Schema):
        raise DdlSyntaxError("CREATE TABLE element list not understood")
    specs: list[ColumnSpec] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for element in schema.expressions:
        inner = element.expressions if isinstance(element, exp.Constraint) else [element]
        for item in inner:
            if isinstance(item, exp.ColumnDef):
                spec = column_spec(item)
                specs.append(spec)
                if spec.primary_key:
                    primary = (spec.name,)
                if spec.unique or spec.type_name == "serial":
                    uniques.append((spec.name,))
            elif isinstance(item, exp.PrimaryKey):
                primary = key_parts(item.expressions) or ()
            elif isinstance(item, exp.UniqueColumnConstraint):
                key = key_parts(unique_parts(item))
                if key:
                    uniques.append(key)
    if not specs:
        raise DdlSyntaxError("CREATE TABLE without columns")
    return tuple(specs), primary, tuple(uniques)


def unique_parts(unique: exp.UniqueColumnConstraint) -> list[exp.Expr]:
    """The key parts of sqlglot's UNIQUE constraint (they sit in a Schema node)."""
    schema = unique.this
    return list(schema.expressions) if isinstance(schema, exp.Schema) else []


def key_parts(parts: list[exp.Expr]) -> tuple[str, ...] | None:
    """Key column names; None when any part is an expression (a functional key)."""
    names = [key_column(part) for part in parts]
    if not names or any(name is None for name in names):
        return None
    return tuple(name for name in names if name is not None)


def table_charset(words: list[Word]) -> tuple[str | None, str | None]:
    """``[DEFAULT] CHARSET|CHARACTER SET [=] x``, ``[DEFAULT] COLLATE [=] y`` in table options."""
    charset = collation = None
    k = 0
    while k < len(words):
        word = words[k].upper
        if word in ("SELECT", "AS", "IGNORE", "REPLACE", "PARTITION", "("):
            break
        step = 2 if word in ("CHARACTER", "CHAR") and upper_at(words, k + 1) == "SET" else 1
        if word in ("CHARSET", "COLLATE") or step == 2:
            k += step
            if upper_at(words, k) == "=":
                k += 1
            if k < len(words):
                value = words[k].text.lower()
                if word == "COLLATE":
                    collation = value
                else:
                    charset = canonical_charset(value)
        k += 1
    return charset, collation


def upper_at(words: list[Word], k: int) -> str:
    """The keyword spelling of ``words[k]``; '' past either end."""
    return words[k].upper if 0 <= k < len(words) else ""


def key_list(c: Cursor, words: list[Word]) -> tuple[str, ...] | None:
    """Column names of the first parenthesised key part list in ``words``."""
    start = next((k for k, w in enumerate(words) if w.upper == "("), None)
    if start is None:
        raise DdlSyntaxError("key without a column list")
    parts = c.text(words[start : closing_paren(words, start) + 1])
    tree = parse_sql(f"ALTER TABLE _t ADD UNIQUE {parts}")
    unique = next(iter(tree.find_all(exp.UniqueColumnConstraint)), None)
    if unique is None:
        raise DdlSyntaxError(f"cannot read key parts {parts!r}")
    return key_parts(unique_parts(unique))
