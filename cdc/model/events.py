"""What flows down a pipeline: row changes and DDL events.

Plain values, free of I/O, so the decoder, the snapshot (Spark tasks), filters
and sinks can pass them around and tests can build them by hand. The shapes
follow Debezium (``op`` letters, before/after images) so that sinks speaking
Debezium's envelope need no translation, and DDL kinds use TiCDC's event-filter
names so filter rules read the same as there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from cdc.model.position import Position
from cdc.model.schema import TableName

__all__ = ["DdlEvent", "DdlKind", "Op", "RowChange"]


class Op(enum.Enum):
    """The kind of a row change; values are Debezium's ``op`` letters.

    ``READ`` is a row read by the snapshot rather than changed in the binlog.
    """

    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"


# Which images each op carries: (needs before, needs after).
_IMAGES = {
    Op.CREATE: (False, True),
    Op.READ: (False, True),
    Op.UPDATE: (True, True),
    Op.DELETE: (True, False),
}


def _describe(needs_before: bool, needs_after: bool) -> str:
    if needs_before and needs_after:
        return "both a before and an after image"
    if needs_after:
        return "an after image and no before image"
    return "a before image and no after image"


# Final: the shared stream tests ``type(event) is RowChange``, which a subclass would slip past.
@final
@dataclass(frozen=True)
class RowChange:
    """One changed (or snapshot-read) row of one table.

    ``key`` holds the row's key column values in key order (see
    :attr:`TableSchema.key_columns`); pipelines hash it to keep one row's
    changes in order. ``before``/``after`` map column names to decoded values
    and are treated as read-only. ``txn_id`` groups the changes of one source
    transaction (the GTID where there is one); ``schema_version`` is the
    :attr:`TableSchema.version` the row was decoded with.
    """

    table: TableName
    op: Op
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None
    key: tuple[Any, ...]
    position: Position
    txn_id: str | None = None
    schema_version: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.table, TableName):
            raise ValueError(f"RowChange table must be a TableName, not {self.table!r}")
        if not isinstance(self.op, Op):
            raise ValueError(
                f"RowChange op for {self.table} must be an Op, not {self.op!r}; "
                f"one of {', '.join(op.name for op in Op)}"
            )
        needs_before, needs_after = _IMAGES[self.op]
        has_before, has_after = self.before is not None, self.after is not None
        if (has_before, has_after) != (needs_before, needs_after):
            raise ValueError(
                f"{self.op.name} row change for {self.table} at {self.position} needs "
                f"{_describe(needs_before, needs_after)}, got "
                f"before={'present' if has_before else 'missing'}, "
                f"after={'present' if has_after else 'missing'}"
            )
        for label, image in (("before", self.before), ("after", self.after)):
            if image is not None and not isinstance(image, Mapping):
                raise ValueError(
                    f"row change for {self.table}: {label} image must be a mapping of "
                    f"column name to value, not {type(image).__name__}"
                )
        if not isinstance(self.key, tuple):
            raise ValueError(
                f"row change for {self.table}: key must be a tuple of key values, "
                f"not {type(self.key).__name__}"
            )
        if not isinstance(self.position, Position):
            raise ValueError(
                f"row change for {self.table}: position must be a Position, not {self.position!r}"
            )
        if (
            isinstance(self.schema_version, bool)
            or not isinstance(self.schema_version, int)
            or self.schema_version < 0
        ):
            raise ValueError(
                f"row change for {self.table}: schema_version must be a non-negative int, "
                f"not {self.schema_version!r}"
            )

    @classmethod
    def decoded(
        cls,
        table: TableName,
        op: Op,
        names: tuple[str, ...],
        before: tuple[Any, ...] | None,
        after: tuple[Any, ...] | None,
        key: tuple[Any, ...],
        position: Position,
        txn_id: str | None,
    ) -> RowChange:
        """A row change built by the binlog decoder from its table map's column ``names``
        and a row's values in that order: not checked again (the checks above cost a
        third of the decoding of a row, on the one path every row of the binlog takes).

        Its images are made into mappings only when first read (``__getattr__``): a
        sink that takes the values as they are (:meth:`decoded_values`) saves making a
        mapping of every row and reading the values back out of it.
        """
        change = object.__new__(cls)
        # item by item: a quarter cheaper than update() with keywords, per row
        state = change.__dict__
        state["table"] = table
        state["op"] = op
        state["_names"] = names
        state["_before"] = before
        state["_after"] = after
        state["key"] = key
        state["position"] = position
        state["txn_id"] = txn_id
        state["schema_version"] = 0
        return change

    def __getattr__(self, name: str) -> Any:
        """``before`` / ``after`` of a :meth:`decoded` change, made on first use."""
        state = self.__dict__
        if name not in ("before", "after") or "_names" not in state:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        values = state["_" + name]
        image = None if values is None else dict(zip(state["_names"], values, strict=True))
        state[name] = image
        return image

    def decoded_values(
        self,
    ) -> tuple[tuple[str, ...], tuple[Any, ...] | None, tuple[Any, ...] | None] | None:
        """``(names, before values, after values)`` of a :meth:`decoded` change (values in
        the order of ``names``, the source table's columns); None for any other."""
        state = self.__dict__
        names = state.get("_names")
        if names is None:
            return None
        return names, state["_before"], state["_after"]

    @property
    def row(self) -> Mapping[str, Any]:
        """The row as it is after the change; for a delete, the row that was removed."""
        return self.row_before if self.op is Op.DELETE else self.row_after

    @property
    def row_before(self) -> Mapping[str, Any]:
        """``before``, for the ops that always carry it (UPDATE, DELETE), typed as present."""
        if self.before is None:
            raise ValueError(f"{self.op.name} row change for {self.table} has no before image")
        return self.before

    @property
    def row_after(self) -> Mapping[str, Any]:
        """``after``, for the ops that always carry it (CREATE, READ, UPDATE), typed as present."""
        if self.after is None:
            raise ValueError(f"{self.op.name} row change for {self.table} has no after image")
        return self.after


class DdlKind(enum.Enum):
    """Kinds of DDL, valued with TiCDC's event-filter names (``ignore-event`` rules)."""

    CREATE_SCHEMA = "create schema"
    DROP_SCHEMA = "drop schema"
    CREATE_TABLE = "create table"
    DROP_TABLE = "drop table"
    RENAME_TABLE = "rename table"
    TRUNCATE_TABLE = "truncate table"
    ALTER_TABLE = "alter table"
    ADD_COLUMN = "add column"
    DROP_COLUMN = "drop column"
    MODIFY_COLUMN = "modify column"
    RENAME_COLUMN = "rename column"
    ADD_INDEX = "add index"
    DROP_INDEX = "drop index"
    ADD_PRIMARY_KEY = "add primary key"
    DROP_PRIMARY_KEY = "drop primary key"
    CREATE_VIEW = "create view"
    DROP_VIEW = "drop view"
    ADD_TABLE_PARTITION = "add table partition"
    DROP_TABLE_PARTITION = "drop table partition"
    TRUNCATE_TABLE_PARTITION = "truncate table partition"
    MODIFY_TABLE_COMMENT = "modify table comment"
    MODIFY_TABLE_CHARSET_AND_COLLATE = "modify table charset and collate"
    MODIFY_SCHEMA_CHARSET_AND_COLLATE = "modify schema charset and collate"
    OTHER = "other"

    @classmethod
    def parse(cls, name: str) -> DdlKind:
        """Look a kind up by its filter name, ignoring case, extra spaces and underscores
        (so ``"Add  Column"`` and ``"ADD_COLUMN"`` both work)."""
        if not isinstance(name, str):
            raise TypeError(f"a DDL kind name must be a str, not {type(name).__name__}")
        wanted = " ".join(name.replace("_", " ").lower().split())
        for kind in cls:
            if kind.value == wanted:
                return kind
        raise ValueError(
            f"unknown DDL kind {name!r}; valid kinds: {', '.join(repr(k.value) for k in cls)}"
        )


@dataclass(frozen=True)
class DdlEvent:
    """One DDL statement from the binlog.

    ``schema`` is the statement's default database (``USE db`` at the time;
    empty when none), needed to resolve unqualified names in ``statement``.
    ``tables`` are the tables it touches, fully qualified (for a rename: old
    then new names); empty for schema-level DDL.
    """

    position: Position
    schema: str
    tables: tuple[TableName, ...]
    kind: DdlKind
    statement: str

    def __post_init__(self) -> None:
        if not isinstance(self.position, Position):
            raise ValueError(f"DDL event position must be a Position, not {self.position!r}")
        if not isinstance(self.schema, str):
            raise ValueError(
                f"DDL event schema must be a string ('' for none), not {self.schema!r}"
            )
        if not isinstance(self.tables, list | tuple) or not all(
            isinstance(t, TableName) for t in self.tables
        ):
            raise ValueError(
                f"DDL event at {self.position}: tables must be a tuple of TableName, "
                f"not {self.tables!r}"
            )
        object.__setattr__(self, "tables", tuple(self.tables))
        if not isinstance(self.kind, DdlKind):
            raise ValueError(
                f"DDL event at {self.position}: kind must be a DdlKind, not {self.kind!r}; "
                "use DdlKind.parse(name)"
            )
        if not isinstance(self.statement, str) or not self.statement.strip():
            raise ValueError(f"DDL event at {self.position} has an empty statement")
