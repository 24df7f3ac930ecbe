"""Row changes as idempotent SQL: upsert by key, delete by key, batched per table.

Every change becomes one or two key operations (:class:`RowOp`)::

    CREATE / READ            -> upsert(after)
    DELETE                   -> delete(key of before)
    UPDATE, same key         -> upsert(after)
    UPDATE, key changed      -> delete(key of before), upsert(after)

An upsert carries the whole row image and a delete only the key, so applying
a key's operations again (a replay after a crash) gives the same row: the
last operation of a key decides its state.

Upserts are ``REPLACE`` when the table has a unique key besides the row key,
or in safe mode (the default); otherwise ``INSERT ... ON DUPLICATE KEY UPDATE``.
Why ``REPLACE``: it removes every row that conflicts with the new image on
*any* unique key, then inserts the image. When a replay runs against a
downstream that is ahead of it (rows already at a later state), an older
image may collide on a secondary unique key with a row whose later change is
also replayed: ``REPLACE`` drops that row and its own replayed change puts it
back, so the end state is the source's. ``ON DUPLICATE KEY UPDATE`` would
instead *update the colliding row* (the one with the other primary key),
mixing two rows into one, or fail with a duplicate key. On a table whose only
unique key is the row key both forms give the same row; ``ON DUPLICATE KEY
UPDATE`` spares the delete-and-insert, which matters to downstream triggers,
hence ``safe-mode=false`` for those tables only. Downstream foreign keys are
not checked (``foreign_key_checks=0``, rows of different tables arrive out of
order), so a ``REPLACE`` never cascades.

:func:`plan` turns one lane transaction's operations into statements: within
a group only a key's last operation is kept, then per table one ``DELETE ...
WHERE key IN (...)`` and one multi-row upsert (values rendered by
:func:`literal`), or for many ``REPLACE`` upserts one ``LOAD DATA ... REPLACE``
of the same rows (``bulk.py``). Reordering within a group is safe because the kept
operations are the rows' states at one moment of the source, where no two
rows collide on any unique key. A group ends early when two keys that may be
one row downstream (``'a'`` and ``'A'`` under a ``_ci`` collation, equal in
``RowOp.folded``) meet, so their order holds. Spellings of one row a fold
misses (``keyfold.py``) are still written right: at the source one spelling
holds the row at a time, so every spelling but the last one written ends with
a delete, and a group's deletes run before its upserts.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from pymysql.converters import encoders, escape_item

from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.keyfold import KeyFolds
from cdc.sink.mysql.localfile import LocalFile
from cdc.sink.mysql.routing import fold_key, fold_text
from cdc.sink.mysql.strict import invalid_enum_columns
from cdc.typeconv import identity, sql_param_converter, writable_columns

__all__ = ["Kind", "RowOp", "Statement", "TableWriter", "UpsertLoader", "plan"]

_MAX_VALUE_TEXT = 120
_MAX_STATEMENT_CHARS = 1 << 20


class Kind(enum.Enum):
    """What a :class:`RowOp` does to its key's row."""

    DELETE = "delete"
    UPSERT = "upsert"


_new_op = tuple.__new__
"""``RowOp`` from a tuple of its fields without the named tuple's own ``__new__`` (a
Python function): one frame less for each row."""


class RowOp(NamedTuple):
    """One key operation: ``params`` are the key's values (DELETE) or the writable
    columns' values (UPSERT), already converted for PyMySQL."""

    writer: TableWriter
    kind: Kind
    key: tuple[Any, ...]
    folded: tuple[Any, ...]
    params: tuple[Any, ...]
    position: Position


@dataclass(frozen=True)
class Statement:
    """One complete SQL text to run (values already rendered as literals).

    ``description`` is what an error names: the SQL with the values elided.
    ``tolerate`` may accept an error as harmless (a replayed DDL).
    ``enum_errors`` are the (row number in the statement, from 1; lower-case column)
    cells that write the invalid ENUM value '' (see ``strict.py``).
    ``local_file`` is the data of a ``LOAD DATA LOCAL INFILE`` (``loadfile.py``).
    ``check`` is given the rows a query answered and raises ``SinkError`` when they
    say the transaction must not go on (it is rolled back: ``chunkfence.py``).
    """

    sql: str
    description: str
    tolerate: Callable[[BaseException], bool] | None = None
    enum_errors: frozenset[tuple[int, str]] = frozenset()
    local_file: LocalFile | None = None
    check: Callable[[Sequence[tuple[Any, ...]]], None] | None = None


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# The escapes of PyMySQL's escape_string (MySQL's backslash escapes; the sink session's
# sql_mode never holds NO_BACKSLASH_ESCAPES).
_ESCAPES = {
    0: "\\0",
    ord("\\"): "\\\\",
    ord("\n"): "\\n",
    ord("\r"): "\\r",
    0x1A: "\\Z",
    ord('"'): '\\"',
    ord("'"): "\\'",
}


def literal(value: Any) -> str:
    """``value`` (a PyMySQL parameter, see ``typeconv.sql_param_converter``) as SQL text.

    The same text as PyMySQL's own escaping, with the common types (str, int,
    None) taken first: building the statement text here, rather than through
    ``executemany``, halves the per-row cost of the lanes, which share one
    interpreter lock.
    """
    kind = type(value)
    if kind is str:
        return "'" + value.translate(_ESCAPES) + "'"
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "NULL"
    return escape_item(value, "utf8mb4", encoders)


def row_literal(values: Sequence[Any]) -> str:
    """``(v1, v2, ...)`` for a VALUES list or a row constructor."""
    return "(" + ",".join([literal(v) for v in values]) + ")"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_TEXT else text[: _MAX_VALUE_TEXT - 3] + "..."


class TableWriter:
    """The statements and value conversions of one table schema version.

    Raises :class:`SinkError` for a table without a usable key (no primary key
    and no NOT NULL unique key): such rows cannot be written idempotently.
    """

    def __init__(
        self, schema: TableSchema, *, safe_mode: bool, folds: KeyFolds | None = None
    ) -> None:
        key_names = schema.key_columns
        if not key_names:
            raise SinkError(
                f"table {schema.name} has no primary key and no NOT NULL unique key; the "
                "MySQL sink writes rows by key (upsert and delete by key, so that a replay "
                "converges) and cannot write this table: add a primary key on the source, "
                "or leave the table out with a filter rule"
            )
        self.schema = schema
        self.name: TableName = schema.name
        self.columns = writable_columns(schema.columns)
        self.key_names = key_names
        key_set = {n.lower() for n in key_names}
        # A unique key besides the row key: rows can collide on it, so one ordered
        # stream of REPLACEs (see the module docstring and routing.py).
        self.serial = bool(schema.other_unique_keys)
        self.uses_replace = safe_mode or self.serial
        table = schema.name.quoted()
        names = [c.name for c in self.columns]
        self._getter = _getter(names)
        self._converters = [
            (i, convert)
            for i, column in enumerate(self.columns)
            if (convert := sql_param_converter(column)) is not identity
        ]
        self._key_getter = _getter(list(key_names))
        self._key_columns = [schema.column(n) for n in key_names]
        self._fold, self.lane_parts = _key_folding(self._key_columns, folds)
        self._key_converters = [
            (i, convert)
            for i, column in enumerate(self._key_columns)
            if (convert := sql_param_converter(column)) is not identity
        ]
        self._all_names = frozenset(schema.column_names)
        self._columns_at: dict[int, tuple[tuple[str, ...], ColumnsAt | None]] = {}
        self._enum_columns = invalid_enum_columns(self.columns)
        self._generated = tuple(c.name for c in schema.columns if c.generated)
        column_list = ", ".join(_quote(n) for n in names)
        verb = "REPLACE" if self.uses_replace else "INSERT"
        self._upsert_head = f"{verb} INTO {table} ({column_list}) VALUES "
        self._upsert_tail = ""
        if not self.uses_replace:
            updated = [n for n in names if n.lower() not in key_set] or list(key_names)
            assignments = ", ".join(f"{_quote(n)} = VALUES({_quote(n)})" for n in updated)
            self._upsert_tail = f" ON DUPLICATE KEY UPDATE {assignments}"
        self._upsert_text = f"{verb} INTO {table} ({column_list}) VALUES (...)" + (
            " ON DUPLICATE KEY UPDATE ..." if self._upsert_tail else ""
        )
        quoted_keys = [_quote(n) for n in key_names]
        if len(quoted_keys) == 1:
            self._delete_head = f"DELETE FROM {table} WHERE {quoted_keys[0]} IN ("
            self._delete_tail = ")"
        else:
            self._delete_head = f"DELETE FROM {table} WHERE ({', '.join(quoted_keys)}) IN ("
            self._delete_tail = ")"
        self._delete_text = f"DELETE FROM {table} WHERE ({', '.join(quoted_keys)}) IN (...)"

    def __repr__(self) -> str:
        return f"TableWriter({self.name}, v{self.schema.version})"

    # --- row changes to operations ----------------------------------------------------------

    def key_of(self, image: Mapping[str, Any], position: Position) -> tuple[Any, ...]:
        """The row key of ``image`` (canonical values)."""
        try:
            return self._key_getter(image)
        except KeyError as exc:
            raise self._shape_error(image, position, exc) from None

    def upsert(self, image: Mapping[str, Any], key: tuple[Any, ...], position: Position) -> RowOp:
        """The operation writing ``image`` as the row of ``key``."""
        if len(image) != len(self._all_names) or (
            self._generated and not all(name in image for name in self._generated)
        ):
            self._check_names(image, position)
        try:
            values = self._getter(image)
        except KeyError as exc:
            raise self._shape_error(image, position, exc) from None
        return self.upsert_values(values, key, position)

    def columns_at(self, names: tuple[str, ...]) -> ColumnsAt | None:
        """Where this writer's values and key are among values in the order of ``names``
        (a decoded change's, ``RowChange.decoded_values``); None when ``names`` are not
        exactly the schema's columns (the image path then says what differs)."""
        found = self._columns_at.get(id(names))
        if found is not None and found[0] is names:
            return found[1]
        at = _columns_at(names, self._all_names, [c.name for c in self.columns], self.key_names)
        if len(self._columns_at) >= _COLUMNS_AT_KEPT:
            self._columns_at.clear()
        self._columns_at[id(names)] = (names, at)
        return at

    def upsert_values(
        self, values: tuple[Any, ...], key: tuple[Any, ...], position: Position
    ) -> RowOp:
        """:meth:`upsert` of this writer's column values (``ColumnsAt.values``)."""
        if self._converters:
            values = self._convert(values, self._converters, self.columns, position)
        return _new_op(RowOp, (self, Kind.UPSERT, key, self._fold(key), values, position))

    def delete(self, key: tuple[Any, ...], position: Position) -> RowOp:
        """The operation removing the row of ``key``."""
        params = key
        if self._key_converters:
            params = self._convert(key, self._key_converters, self._key_columns, position)
        return _new_op(RowOp, (self, Kind.DELETE, key, self._fold(key), params, position))

    def _convert(
        self,
        values: tuple[Any, ...],
        converters: list[tuple[int, Callable[[Any], Any]]],
        columns: Sequence[Any],
        position: Position,
    ) -> tuple[Any, ...]:
        out = list(values)
        for i, convert in converters:
            try:
                out[i] = convert(out[i])
            except (TypeError, ValueError) as exc:
                column = columns[i]
                raise SinkError(
                    f"row change for {self.name} at {position}: column {column.name!r} "
                    f"({column.column_type}) cannot be written: {_short(str(exc))}"
                ) from None
        return tuple(out)

    def _check_names(self, image: Mapping[str, Any], position: Position) -> None:
        unknown = sorted(set(image) - self._all_names)
        if unknown:
            raise SinkError(
                f"row change for {self.name} at {position} has column(s) {unknown} that "
                f"schema version {self.schema.version} lacks (its columns: "
                f"{', '.join(self.schema.column_names)}); the row and the schema disagree"
            )

    def _shape_error(
        self, image: Mapping[str, Any], position: Position, exc: KeyError
    ) -> SinkError:
        missing = sorted(({c.name for c in self.columns} | set(self.key_names)) - set(image))
        return SinkError(
            f"row change for {self.name} at {position} lacks column(s) "
            f"{missing or [exc.args[0]]} of schema version {self.schema.version}; "
            "the row and the schema disagree"
        )

    # --- statements ----------------------------------------------------------------------------

    def upsert_statements(self, rows: Sequence[tuple[Any, ...]]) -> list[Statement]:
        """Multi-row upserts of ``rows``, each statement at most ~1 MB of text (more rows
        per statement stop paying off long before ``max_allowed_packet``)."""
        return self._chunked(
            self._upsert_head, self._upsert_tail, rows, self._upsert_text, self._enum_columns
        )

    def delete_statements(self, keys: Sequence[tuple[Any, ...]]) -> list[Statement]:
        """``DELETE ... WHERE key IN (...)`` of the rows of ``keys`` (parameter values)."""
        if len(self.key_names) == 1:
            return self._chunked(
                self._delete_head, self._delete_tail, keys, self._delete_text, single=True
            )
        return self._chunked(self._delete_head, self._delete_tail, keys, self._delete_text)

    def _chunked(
        self,
        head: str,
        tail: str,
        rows: Sequence[tuple[Any, ...]],
        text: str,
        enum_columns: Sequence[tuple[int, str]] = (),
        *,
        single: bool = False,
    ) -> list[Statement]:
        statements: list[Statement] = []
        parts: list[str] = []
        cells: list[tuple[int, str]] = []
        size = 0
        for row in rows:
            part = literal(row[0]) if single else row_literal(row)
            if parts and size + len(part) > _MAX_STATEMENT_CHARS:
                statements.append(self._statement(head, tail, parts, text, cells))
                parts, cells, size = [], [], 0
            parts.append(part)
            size += len(part) + 1
            for index, name in enum_columns:
                if row[index] == "":
                    cells.append((len(parts), name))
        if parts:
            statements.append(self._statement(head, tail, parts, text, cells))
        return statements

    @staticmethod
    def _statement(
        head: str, tail: str, parts: list[str], text: str, cells: list[tuple[int, str]]
    ) -> Statement:
        count = len(parts)
        return Statement(
            head + ",".join(parts) + tail, f"{text} [{count} row(s)]", enum_errors=frozenset(cells)
        )


def _key_folding(
    columns: Sequence[Column], folds: KeyFolds | None
) -> tuple[Callable[[tuple[Any, ...]], tuple[Any, ...]], tuple[int, ...] | None]:
    """How a key folds (``RowOp.folded``), and which of its parts choose its lane (None:
    all of them). Without ``folds`` (a writer whose operations use no lanes) text folds
    by ``fold_key``; with them each text part by its collation (``keyfold.py``), a part
    no fold is safe for folding by ``fold_text`` for :func:`plan` and left out of the
    lane."""
    if folds is None:
        return fold_key, None
    texts = {i: folds.part_fold(c) for i, c in enumerate(columns) if c.charset is not None}
    if not texts:
        return _unfolded, None
    by_part = [(texts[i] or fold_text) if i in texts else None for i in range(len(columns))]

    def fold(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(
            f(v) if f is not None and isinstance(v, str) else v
            for v, f in zip(key, by_part, strict=True)
        )

    unsafe = {i for i, part_fold in texts.items() if part_fold is None}
    lane_parts = tuple(i for i in range(len(columns)) if i not in unsafe) if unsafe else None
    return fold, lane_parts


def _unfolded(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return key


_COLUMNS_AT_KEPT = 16
"""How many column orders a writer remembers (one per table map the decoder keeps)."""


class ColumnsAt(NamedTuple):
    """A writer's values and key picked from values in a decoded change's column order."""

    values: Callable[[tuple[Any, ...]], tuple[Any, ...]]
    key: Callable[[tuple[Any, ...]], tuple[Any, ...]]


def _columns_at(
    names: tuple[str, ...],
    all_names: frozenset[str],
    columns: list[str],
    key_names: Sequence[str],
) -> ColumnsAt | None:
    index = {name: i for i, name in enumerate(names)}
    if len(index) != len(all_names) or not all_names.issuperset(names):
        return None
    if not all(name in index for name in (*columns, *key_names)):
        return None
    picked = [index[name] for name in columns]
    values = _unpicked if picked == list(range(len(names))) else _getter(picked)
    return ColumnsAt(values, _getter([index[name] for name in key_names]))


def _unpicked(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return values


def _getter(keys: Sequence[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """The items of ``keys`` (names of an image, or positions in a tuple of values) as a
    tuple, however many there are (``itemgetter`` of one returns the item alone)."""
    if len(keys) == 1:
        key = keys[0]

        def one(items: Any) -> tuple[Any, ...]:
            return (items[key],)

        return one
    return itemgetter(*keys)


UpsertLoader = Callable[["TableWriter", Sequence[tuple[Any, ...]]], "list[Statement] | None"]
"""The bulk form of one table's upserts in a group (``bulk.py``), or ``None``: statements."""


def plan(ops: Sequence[RowOp], max_rows: int, load: UpsertLoader | None = None) -> list[Statement]:
    """The statements applying ``ops`` (one lane transaction) in an equivalent order.

    See the module docstring for why grouping keeps the result; each statement
    carries at most ``max_rows`` rows or keys. ``load`` may take a table's upserts
    of a group instead (``LOAD DATA``, at most ``bulk.MAX_LOAD_ROWS`` rows each);
    they keep their place, after that table's deletes of the group.
    """
    statements: list[Statement] = []
    group: dict[tuple[TableName, tuple[Any, ...]], RowOp] = {}
    for op in ops:
        slot = (op.writer.name, op.folded)
        held = group.get(slot)
        if held is not None and held.key != op.key:
            _emit(group, statements, max_rows, load)
            group = {}
        group[slot] = op
    _emit(group, statements, max_rows, load)
    return statements


def _emit(
    group: dict[Any, RowOp],
    statements: list[Statement],
    max_rows: int,
    load: UpsertLoader | None,
) -> None:
    by_writer: dict[int, tuple[TableWriter, list[tuple[Any, ...]], list[tuple[Any, ...]]]] = {}
    for op in group.values():
        entry = by_writer.get(id(op.writer))
        if entry is None:
            entry = by_writer[id(op.writer)] = (op.writer, [], [])
        (entry[1] if op.kind is Kind.DELETE else entry[2]).append(op.params)
    for writer, deletes, upserts in by_writer.values():
        for start in range(0, len(deletes), max_rows):
            statements.extend(writer.delete_statements(deletes[start : start + max_rows]))
        loads = load(writer, upserts) if load is not None and upserts else None
        if loads is not None:
            statements.extend(loads)
            continue
        for start in range(0, len(upserts), max_rows):
            statements.extend(writer.upsert_statements(upserts[start : start + max_rows]))
