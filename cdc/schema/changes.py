"""Schema changes read from DDL, and applying them to a set of table schemas.

``ddl.py`` turns a statement into a tuple of the change objects below; this
module applies them. Applying is pure (a new mapping; schemas are frozen) and
bumps a table's ``version`` once per statement that changes it.

Index names: :class:`~cdc.model.TableSchema` keeps unique keys as column
tuples without their names, so ``DROP INDEX name`` is matched by the name
MySQL gives an unnamed key (its first column, then ``_2``, ``_3`` ...). A
unique key created with another name is not found by name; it is then left
in place (logged at info level: most dropped indexes are plain ones, which
rightly change nothing). The fix is a names field in the model.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from cdc.model import Column, Flavor, TableName, TableSchema
from cdc.schema.columns import (
    CHARACTER_TYPES,
    ColumnSpec,
    build_column,
    default_collation,
    max_bytes_per_char,
    render_default,
)
from cdc.schema.errors import DdlApplyError

__all__ = [
    "AddColumns",
    "AddKey",
    "AlterTable",
    "Change",
    "ChangeColumn",
    "ConvertCharset",
    "CreateTable",
    "CreateTableLike",
    "DdlApplyError",
    "DropColumn",
    "DropIndex",
    "DropPrimaryKey",
    "DropSchema",
    "DropTables",
    "RenameColumn",
    "RenameTables",
    "RenameTo",
    "SetDefault",
    "apply_changes",
]

log = logging.getLogger(__name__)


# Where a column goes: None (end, or unchanged for MODIFY), ("first", None), ("after", column).
Placement = tuple[str, str | None] | None


@dataclass(frozen=True)
class CreateTable:
    """CREATE TABLE with its column list; keys in definition order, inline ones included."""

    table: TableName
    columns: tuple[ColumnSpec, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, ...], ...] = ()
    charset: str | None = None
    collation: str | None = None
    if_not_exists: bool = False
    replace: bool = False


@dataclass(frozen=True)
class CreateTableLike:
    """CREATE TABLE ... LIKE: a copy of the source's columns and keys."""

    table: TableName
    source: TableName
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropTables:
    """DROP TABLE of one or more tables; unknown ones are skipped (IF EXISTS or untracked)."""

    tables: tuple[TableName, ...]


@dataclass(frozen=True)
class RenameTables:
    """RENAME TABLE pairs, applied in order (so swaps through a temporary name work)."""

    pairs: tuple[tuple[TableName, TableName], ...]


@dataclass(frozen=True)
class DropSchema:
    """DROP DATABASE (and CREATE OR REPLACE DATABASE): every table of the schema goes."""

    schema: str


@dataclass(frozen=True)
class AddColumns:
    """ADD COLUMN, one definition or a parenthesised list."""

    columns: tuple[ColumnSpec, ...]
    placement: Placement = None
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropColumn:
    """DROP COLUMN; the column also leaves every key, and emptied keys go."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ChangeColumn:
    """MODIFY (``old == column.name``, case aside) and CHANGE (may rename)."""

    old: str
    column: ColumnSpec
    placement: Placement = None
    if_exists: bool = False


@dataclass(frozen=True)
class RenameColumn:
    """RENAME COLUMN old TO new; keys follow the new name."""

    old: str
    new: str


@dataclass(frozen=True)
class SetDefault:
    """``ALTER COLUMN c SET DEFAULT value``; ``value`` None for ``DROP DEFAULT``."""

    name: str
    value: exp.Expr | None


@dataclass(frozen=True)
class AddKey:
    """ADD PRIMARY KEY / ADD UNIQUE; ``columns`` is None for a functional key (no identity)."""

    primary: bool
    columns: tuple[str, ...] | None
    if_not_exists: bool = False


@dataclass(frozen=True)
class DropPrimaryKey:
    """DROP PRIMARY KEY; its columns stay NOT NULL."""


@dataclass(frozen=True)
class DropIndex:
    """DROP INDEX/KEY by name (see the module doc on unique key names)."""

    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class RenameTo:
    """ALTER TABLE ... RENAME TO another name."""

    table: TableName


@dataclass(frozen=True)
class ConvertCharset:
    """CONVERT TO CHARACTER SET: every character column changes charset."""

    charset: str
    collation: str | None = None


AlterAction = (
    AddColumns
    | DropColumn
    | ChangeColumn
    | RenameColumn
    | SetDefault
    | AddKey
    | DropPrimaryKey
    | DropIndex
    | RenameTo
    | ConvertCharset
)


@dataclass(frozen=True)
class AlterTable:
    """The actions of one ALTER TABLE (or CREATE/DROP INDEX), applied as one version."""

    table: TableName
    actions: tuple[AlterAction, ...]
    if_exists: bool = False


Change = CreateTable | CreateTableLike | DropTables | RenameTables | DropSchema | AlterTable


def apply_changes(
    schemas: Mapping[TableName, TableSchema], changes: tuple[Change, ...], flavor: Flavor
) -> dict[TableName, TableSchema]:
    """A new mapping with ``changes`` applied in order; ``schemas`` is left alone.

    Raises :class:`DdlApplyError` when a change does not fit (a missing column).
    """
    result = dict(schemas)
    for change in changes:
        _APPLY[type(change)](result, change, flavor)
    return result


def _create_table(
    result: dict[TableName, TableSchema], change: CreateTable, flavor: Flavor
) -> None:
    old = result.get(change.table)
    if old is not None:
        if change.if_not_exists:
            return
        if not change.replace:
            log.warning("CREATE TABLE %s replaces the history's version of it", change.table)
    columns = [
        build_column(spec, flavor, change.charset, change.collation) for spec in change.columns
    ]
    draft = _Draft(change.table, columns, [], [])
    if change.primary_key:
        draft.add_key(True, change.primary_key)
    for key in change.unique_keys:
        draft.add_key(False, key)
    result[change.table] = draft.schema(0 if old is None else old.version + 1)


def _create_like(
    result: dict[TableName, TableSchema], change: CreateTableLike, _flavor: Flavor
) -> None:
    old = result.get(change.table)
    if old is not None and change.if_not_exists:
        return
    source = result.get(change.source)
    if source is None:
        log.warning(
            "CREATE TABLE %s LIKE %s: %s is not in the schema history; %s stays unknown",
            change.table,
            change.source,
            change.source,
            change.table,
        )
        return
    version = 0 if old is None else old.version + 1
    result[change.table] = dataclasses.replace(source, name=change.table, version=version)


def _drop_tables(result: dict[TableName, TableSchema], change: DropTables, _flavor: Flavor) -> None:
    for table in change.tables:
        result.pop(table, None)


def _rename_tables(
    result: dict[TableName, TableSchema], change: RenameTables, _flavor: Flavor
) -> None:
    for old, new in change.pairs:
        schema = result.pop(old, None)
        if schema is None:
            log.warning("RENAME TABLE %s TO %s: %s is not in the schema history", old, new, old)
            result.pop(new, None)
            continue
        if new in result:
            raise DdlApplyError(f"RENAME TABLE {old} TO {new}: {new} exists already in the history")
        result[new] = dataclasses.replace(schema, name=new, version=schema.version + 1)


def _drop_schema(result: dict[TableName, TableSchema], change: DropSchema, _flavor: Flavor) -> None:
    for table in [t for t in result if t.schema == change.schema]:
        del result[table]


def _alter_table(result: dict[TableName, TableSchema], change: AlterTable, flavor: Flavor) -> None:
    old = result.get(change.table)
    if old is None:
        log.debug("ALTER TABLE %s: not in the schema history, nothing to change", change.table)
        return
    draft = _Draft.of(old)
    for action in change.actions:
        if isinstance(action, RenameTo):
            if action.table != draft.name and action.table in result:
                raise DdlApplyError(
                    f"ALTER TABLE {change.table} RENAME TO {action.table}: "
                    f"{action.table} exists already in the history"
                )
            draft.name = action.table
        else:
            _alter(draft, action, flavor)
    new = draft.schema(old.version + 1)
    if dataclasses.replace(new, version=old.version) == old:
        return
    del result[change.table]
    result[new.name] = new


# Keyed by the change's type, so each function is only given its own kind of change.
_APPLY: dict[type, Callable[[dict[TableName, TableSchema], Any, Flavor], None]] = {
    CreateTable: _create_table,
    CreateTableLike: _create_like,
    DropTables: _drop_tables,
    RenameTables: _rename_tables,
    DropSchema: _drop_schema,
    AlterTable: _alter_table,
}


class _Draft:
    """A table schema being changed by the actions of one ALTER TABLE."""

    def __init__(
        self,
        name: TableName,
        columns: list[Column],
        primary_key: list[str],
        unique_keys: list[tuple[str, ...]],
    ) -> None:
        self.name = name
        self.columns = columns
        self.primary_key = primary_key
        self.unique_keys = unique_keys

    @classmethod
    def of(cls, schema: TableSchema) -> _Draft:
        return cls(
            schema.name, list(schema.columns), list(schema.primary_key), list(schema.unique_keys)
        )

    def schema(self, version: int) -> TableSchema:
        """The finished schema; unique keys NOT NULL first, as the server orders them."""
        nullable = {c.name.lower() for c in self.columns if c.nullable}
        keys = sorted(self.unique_keys, key=lambda k: any(n.lower() in nullable for n in k))
        return TableSchema(
            self.name, tuple(self.columns), tuple(self.primary_key), tuple(keys), version
        )

    def find(self, name: str) -> int | None:
        lowered = name.lower()
        for i, column in enumerate(self.columns):
            if column.name.lower() == lowered:
                return i
        return None

    def index(self, name: str, what: str) -> int:
        i = self.find(name)
        if i is None:
            raise DdlApplyError(
                f"{what}: table {self.name} has no column {name!r} in the schema history "
                f"(columns: {', '.join(c.name for c in self.columns)})"
            )
        return i

    def place(self, column: Column, placement: Placement, what: str) -> None:
        if placement is None:
            self.columns.append(column)
        elif placement[0] == "first":
            self.columns.insert(0, column)
        else:
            self.columns.insert(self.index(placement[1] or "", what) + 1, column)

    def add_key(self, primary: bool, columns: tuple[str, ...]) -> None:
        resolved = tuple(self.columns[self.index(n, "key")].name for n in columns)
        if primary:
            if self.primary_key:
                raise DdlApplyError(f"table {self.name} has a primary key already")
            self.primary_key = list(resolved)
            for name in resolved:
                i = self.index(name, "primary key")
                self.columns[i] = _not_null(self.columns[i])
        else:
            self.unique_keys.append(resolved)

    def rename_in_keys(self, old: str, new: str) -> None:
        def swap(key: tuple[str, ...] | list[str]) -> tuple[str, ...]:
            return tuple(new if n.lower() == old.lower() else n for n in key)

        self.primary_key = list(swap(self.primary_key))
        self.unique_keys = [swap(key) for key in self.unique_keys]

    def drop_from_keys(self, name: str) -> None:
        lowered = name.lower()
        self.primary_key = [n for n in self.primary_key if n.lower() != lowered]
        kept = (tuple(n for n in key if n.lower() != lowered) for key in self.unique_keys)
        self.unique_keys = [key for key in kept if key]

    def drop_index(self, name: str, if_exists: bool) -> None:
        if name.lower() == "primary":
            self.primary_key = []
            return
        for i, key_name in enumerate(_auto_key_names(self.unique_keys)):
            if key_name.lower() == name.lower():
                del self.unique_keys[i]
                return
        if self.unique_keys and not if_exists:
            log.info(
                "DROP INDEX %s on %s: no unique key has that MySQL-generated name; assuming it "
                "is a non-unique index and keeping unique keys %s",
                name,
                self.name,
                self.unique_keys,
            )


def _not_null(column: Column) -> Column:
    """A key column made NOT NULL by the server; a NULL default goes with it."""
    default = None if column.default == "NULL" else column.default
    return dataclasses.replace(column, nullable=False, default=default)


def _auto_key_names(keys: list[tuple[str, ...]]) -> list[str]:
    """The names MySQL gives unnamed keys: the first column, then ``_2``, ``_3`` ..."""
    names: list[str] = []
    taken: set[str] = {"primary"}
    for key in keys:
        name = key[0]
        n = 2
        while name.lower() in taken:
            name = f"{key[0]}_{n}"
            n += 1
        taken.add(name.lower())
        names.append(name)
    return names


def _alter(draft: _Draft, action: AlterAction, flavor: Flavor) -> None:
    what = f"ALTER TABLE {draft.name}"
    if isinstance(action, AddColumns):
        for spec in action.columns:
            if draft.find(spec.name) is not None:
                if action.if_not_exists:
                    continue
                raise DdlApplyError(f"{what} ADD COLUMN {spec.name}: the column exists already")
            draft.place(build_column(spec, flavor), action.placement, what)
            _inline_keys(draft, spec)
    elif isinstance(action, DropColumn):
        i = draft.find(action.name)
        if i is None and action.if_exists:
            return
        i = draft.index(action.name, f"{what} DROP COLUMN")
        if len(draft.columns) == 1:
            raise DdlApplyError(f"{what} DROP COLUMN {action.name}: it is the only column")
        del draft.columns[i]
        draft.drop_from_keys(action.name)
    elif isinstance(action, ChangeColumn):
        _change_column(draft, action, flavor, what)
    elif isinstance(action, RenameColumn):
        i = draft.index(action.old, f"{what} RENAME COLUMN")
        draft.columns[i] = dataclasses.replace(draft.columns[i], name=action.new)
        draft.rename_in_keys(action.old, action.new)
    elif isinstance(action, SetDefault):
        i = draft.index(action.name, f"{what} ALTER COLUMN")
        column = draft.columns[i]
        default = render_default(action.value, column.data_type, column.nullable, flavor)
        draft.columns[i] = dataclasses.replace(column, default=default)
    elif isinstance(action, AddKey):
        if action.columns is None:
            return
        if action.if_not_exists and _has_key(draft, action):
            return
        draft.add_key(action.primary, action.columns)
    elif isinstance(action, DropPrimaryKey):
        draft.primary_key = []
    elif isinstance(action, DropIndex):
        draft.drop_index(action.name, action.if_exists)
    elif isinstance(action, ConvertCharset):
        _convert_charset(draft, action, flavor)


def _has_key(draft: _Draft, action: AddKey) -> bool:
    wanted = tuple(n.lower() for n in action.columns or ())
    if action.primary:
        return bool(draft.primary_key)
    return any(tuple(n.lower() for n in key) == wanted for key in draft.unique_keys)


def _inline_keys(draft: _Draft, spec: ColumnSpec) -> None:
    if spec.primary_key:
        draft.add_key(True, (spec.name,))
    if spec.unique or spec.type_name == "serial":
        draft.add_key(False, (spec.name,))


def _change_column(draft: _Draft, action: ChangeColumn, flavor: Flavor, what: str) -> None:
    i = draft.find(action.old)
    if i is None and action.if_exists:
        return
    i = draft.index(action.old, f"{what} CHANGE/MODIFY COLUMN")
    spec = action.column
    clash = draft.find(spec.name)
    if clash is not None and clash != i:
        raise DdlApplyError(f"{what} CHANGE {action.old} {spec.name}: {spec.name} exists already")
    column = build_column(spec, flavor)
    if any(n.lower() == action.old.lower() for n in draft.primary_key):
        column = _not_null(column)
    if action.placement is None:
        draft.columns[i] = column
    else:
        del draft.columns[i]
        draft.place(column, action.placement, what)
    draft.rename_in_keys(action.old, spec.name)
    _inline_keys(draft, spec)


_TEXT_LIMITS = {"tinytext": 255, "text": 65535, "mediumtext": 16777215}


def _convert_charset(draft: _Draft, action: ConvertCharset, flavor: Flavor) -> None:
    """CONVERT TO CHARACTER SET: every character column moves; TEXT grows to keep its length.

    The server picks the smallest TEXT type that holds as many characters in
    the new charset as the old type held in the old one (latin1 TEXT ->
    utf8mb4 MEDIUMTEXT). Unknown old charset (None): the type is kept.
    """
    if action.charset == "binary":
        log.warning(
            "ALTER TABLE %s CONVERT TO CHARACTER SET binary turns text into binary types; "
            "not modelled, schema left as it was",
            draft.name,
        )
        return
    collation = action.collation or default_collation(action.charset, flavor)
    new_width = max_bytes_per_char(action.charset) or 4
    for i, column in enumerate(draft.columns):
        if column.data_type not in CHARACTER_TYPES:
            continue
        data_type = column.data_type
        old_width = max_bytes_per_char(column.charset)
        if data_type in _TEXT_LIMITS and old_width is not None and new_width > old_width:
            chars = _TEXT_LIMITS[data_type] // old_width
            data_type = next(
                (name for name, limit in _TEXT_LIMITS.items() if chars * new_width <= limit),
                "longtext",
            )
        column_type = data_type if data_type != column.data_type else column.column_type
        draft.columns[i] = dataclasses.replace(
            column,
            data_type=data_type,
            column_type=column_type,
            charset=action.charset,
            collation=collation,
        )
