"""Table names and table schemas, as the snapshot, decoder, filters and sinks share them.

A :class:`TableSchema` is one version of a table's definition. The owner bumps
``version`` each time it applies a DDL to the table, and every row change names
the version it was decoded with, so a sink never applies a row to the wrong
shape. Schemas are persisted (schema history in etcd), hence ``to_dict`` /
``from_dict`` with a format version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Column", "TableName", "TableSchema"]

FORMAT_VERSION = 1
_NAME_FORM = "expected 'schema.table', e.g. 'shop.orders' (quote dotted names: `my.db`.`t`)"


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _key_part(identifier: str) -> str:
    """``identifier`` as one part of ``str(TableName)``: bare unless that would be ambiguous.

    A dot would read as the separator, a backtick as quoting, and leading or
    trailing blanks would be stripped by :meth:`TableName.parse`; such a part
    is backtick-quoted. Every other name stays bare, so the keys, log lines and
    metric labels of ordinary tables read ``shop.orders``.
    """
    if "." in identifier or "`" in identifier or identifier != identifier.strip():
        return _quote(identifier)
    return identifier


def _as_tuple(value: Any) -> Any:
    """JSON lists back to tuples; anything else is left for validation to reject."""
    return tuple(value) if isinstance(value, list) else value


def _split_name(text: str) -> list[str]:
    """Split ``a.b`` / ```a`.`b` `` into identifiers, honouring backtick quoting."""
    parts: list[str] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == "`":
            i += 1
            ident: list[str] = []
            while True:
                if i >= n:
                    raise ValueError(f"table name {text!r} has an unclosed backtick; {_NAME_FORM}")
                if text[i] == "`":
                    if i + 1 < n and text[i + 1] == "`":
                        ident.append("`")
                        i += 2
                        continue
                    i += 1
                    break
                ident.append(text[i])
                i += 1
            parts.append("".join(ident))
        else:
            end = text.find(".", i)
            end = n if end < 0 else end
            chunk = text[i:end]
            if "`" in chunk:
                raise ValueError(f"table name {text!r} has a stray backtick; {_NAME_FORM}")
            parts.append(chunk)
            i = end
        if i >= n:
            return parts
        if text[i] != ".":
            raise ValueError(
                f"table name {text!r} has text after a quoted name at {text[i:]!r}; {_NAME_FORM}"
            )
        i += 1


@dataclass(frozen=True)
class TableName:
    """A fully qualified table name; ``str()`` is the ``schema.table`` key used everywhere.

    The string form is unambiguous and round-trips (``TableName.parse(str(n)) == n``):
    a part holding a dot or a backtick, or starting or ending with a blank, is
    backtick-quoted with backticks doubled (`shop-eu.v2`.orders, shop.`a``b`);
    any other part is written bare (shop.orders). Code holding such a string
    splits it with :meth:`parse` only, never at a dot.
    """

    schema: str
    table: str

    def __post_init__(self) -> None:
        for label, value in (("schema", self.schema), ("table", self.table)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{label} name must be a non-empty string, not {value!r}")
        object.__setattr__(self, "_hash", hash((self.schema, self.table)))

    def __hash__(self) -> int:
        # Kept, not computed per call: a row's table is looked up a few times on its way
        # to the sink, and the dataclass's own hash is a Python function hashing a tuple.
        return self._hash  # type: ignore[attr-defined]

    def __reduce__(self) -> tuple[type[TableName], tuple[str, str]]:
        # Rebuilt, not copied: another process hashes strings with another seed.
        return TableName, (self.schema, self.table)

    def __str__(self) -> str:
        return f"{_key_part(self.schema)}.{_key_part(self.table)}"

    def quoted(self) -> str:
        """The name quoted for SQL: ```schema`.`table` ``, backticks doubled."""
        return f"{_quote(self.schema)}.{_quote(self.table)}"

    @classmethod
    def parse(cls, text: str) -> TableName:
        """The inverse of ``str()``: ``schema.table``, either part backtick-quoted at will."""
        if not isinstance(text, str):
            raise TypeError(f"table name must be a str, not {type(text).__name__}")
        stripped = text.strip()
        parts = _split_name(stripped)
        if len(parts) != 2:
            raise ValueError(
                f"table name {text!r} has {len(parts)} dot-separated part(s), not 2; {_NAME_FORM}"
            )
        if not parts[0] or not parts[1]:
            raise ValueError(f"table name {text!r} has an empty schema or table; {_NAME_FORM}")
        return cls(parts[0], parts[1])


@dataclass(frozen=True)
class Column:
    """One column as the source defines it.

    ``data_type`` is the lower-case base type (``int``, ``varchar``, ``enum``);
    ``column_type`` the full definition (``int(10) unsigned``, ``enum('a','b')``).
    ``precision``/``scale`` are for numeric types, ``fsp`` the fractional
    seconds of temporal types, ``elements`` the members of ENUM and SET.
    ``default`` is the default as the server reports it (text), None for none.
    """

    name: str
    data_type: str
    column_type: str
    nullable: bool = True
    unsigned: bool = False
    charset: str | None = None
    collation: str | None = None
    precision: int | None = None
    scale: int | None = None
    fsp: int | None = None
    elements: tuple[str, ...] = ()
    generated: bool = False
    default: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"column name must be a non-empty string, not {self.name!r}")
        for label in ("data_type", "column_type"):
            value = getattr(self, label)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"column {self.name!r}: {label} must be a non-empty string")
        # Normalised here so lookups by type never depend on how a caller spelled it.
        object.__setattr__(self, "data_type", self.data_type.strip().lower())
        if isinstance(self.elements, str) or not all(isinstance(e, str) for e in self.elements):
            raise ValueError(
                f"column {self.name!r}: elements must be a sequence of strings, "
                f"not {self.elements!r}"
            )
        object.__setattr__(self, "elements", tuple(self.elements))
        for label in ("precision", "scale", "fsp"):
            value = getattr(self, label)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"column {self.name!r}: {label} must be a non-negative int or None, "
                    f"not {value!r}"
                )
        if self.fsp is not None and self.fsp > 6:
            raise ValueError(
                f"column {self.name!r}: fsp (fractional seconds precision) must be 0..6, "
                f"not {self.fsp}"
            )

    def to_dict(self) -> dict[str, Any]:
        """All fields, JSON-ready (``elements`` as a list)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["elements"] = list(self.elements)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Column:
        """Read what :meth:`to_dict` wrote; unknown keys are an error, not silently dropped."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored column must be a JSON object, not {data!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"stored column {data.get('name')!r} has unknown field(s) {unknown}; "
                f"known fields: {sorted(known)}"
            )
        missing = [name for name in ("name", "data_type", "column_type") if name not in data]
        if missing:
            raise ValueError(f"stored column lacks {', '.join(missing)}: {dict(data)!r}")
        values = dict(data)
        if "elements" in values:
            if not isinstance(values["elements"], list | tuple):
                raise ValueError(
                    f"stored column {data['name']!r}: elements must be a list, "
                    f"not {values['elements']!r}"
                )
            values["elements"] = tuple(values["elements"])
        return cls(**values)


@dataclass(frozen=True)
class TableSchema:
    """One version of a table definition.

    Key column names are checked against ``columns`` (case-insensitively, as
    MySQL does) and stored spelled as the columns spell them, so they can
    index decoded rows directly.
    """

    name: TableName
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    unique_keys: tuple[tuple[str, ...], ...] = ()
    version: int = 0
    # Derived from ``columns`` in __post_init__: not an argument, not part of equality.
    _by_lower: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, TableName):
            raise ValueError(f"table schema name must be a TableName, not {self.name!r}")
        columns = tuple(self.columns)
        if not columns:
            raise ValueError(f"table {self.name} must have at least one column")
        if not all(isinstance(c, Column) for c in columns):
            raise ValueError(f"table {self.name}: columns must be Column objects")
        by_lower: dict[str, Column] = {}
        for column in columns:
            if column.name.lower() in by_lower:
                raise ValueError(f"table {self.name} has column {column.name!r} twice")
            by_lower[column.name.lower()] = column
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "_by_lower", by_lower)
        object.__setattr__(self, "primary_key", self._resolve_key(self.primary_key, "primary key"))
        if not isinstance(self.unique_keys, list | tuple):
            raise ValueError(f"table {self.name}: unique_keys must be a sequence of key tuples")
        object.__setattr__(
            self,
            "unique_keys",
            tuple(self._resolve_key(key, "unique key", required=True) for key in self.unique_keys),
        )
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise ValueError(
                f"table {self.name}: version must be a non-negative int, not {self.version!r}"
            )

    def _resolve_key(self, key: Any, label: str, required: bool = False) -> tuple[str, ...]:
        if not isinstance(key, list | tuple) or not all(isinstance(part, str) for part in key):
            raise ValueError(
                f"table {self.name}: {label} must be a sequence of column names, not {key!r}"
            )
        names = tuple(key)
        if required and not names:
            raise ValueError(f"table {self.name}: a {label} needs at least one column")
        if len({n.lower() for n in names}) != len(names):
            raise ValueError(f"table {self.name}: {label} {names} repeats a column")
        return tuple(self._lookup(n, f"{label} {names}").name for n in names)

    def _lookup(self, name: str, used_by: str | None = None) -> Column:
        column = self._by_lower.get(name.lower()) if isinstance(name, str) else None
        if column is None:
            where = f" (named in {used_by})" if used_by else ""
            raise KeyError(
                f"table {self.name} has no column {name!r}{where}; "
                f"its columns are {', '.join(self.column_names)}"
            )
        return column

    def column(self, name: str) -> Column:
        """The column called ``name``, matched case-insensitively as MySQL does."""
        return self._lookup(name)

    @property
    def column_names(self) -> tuple[str, ...]:
        """Column names in table order."""
        return tuple(c.name for c in self.columns)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns that identify a row: the primary key, else the first unique key
        whose columns are all NOT NULL (a nullable unique key can hold many NULL rows),
        else ``()`` when the table has no usable key."""
        if self.primary_key:
            return self.primary_key
        for key in self.unique_keys:
            if not any(self._lookup(n).nullable for n in key):
                return key
        return ()

    @property
    def other_unique_keys(self) -> tuple[tuple[str, ...], ...]:
        """The unique keys (the primary key included) besides ``key_columns``: rows can
        collide on them, so writes by key alone do not order rows against each other."""
        key = {n.lower() for n in self.key_columns}
        return tuple(
            k for k in (self.primary_key, *self.unique_keys) if k and {n.lower() for n in k} != key
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict carrying ``"v": 1``."""
        return {
            "v": FORMAT_VERSION,
            "name": {"schema": self.name.schema, "table": self.name.table},
            "columns": [c.to_dict() for c in self.columns],
            "primary_key": list(self.primary_key),
            "unique_keys": [list(key) for key in self.unique_keys],
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableSchema:
        """Read what :meth:`to_dict` wrote, switching on the format version ``"v"``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored table schema must be a JSON object, not {data!r}")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"unsupported table schema format version {version!r} "
                f"(this build reads version {FORMAT_VERSION})"
            )
        missing = [k for k in ("name", "columns", "primary_key") if k not in data]
        if missing:
            raise ValueError(f"stored table schema lacks {', '.join(missing)}")
        name = data["name"]
        if not isinstance(name, Mapping) or set(name) != {"schema", "table"}:
            raise ValueError(
                f"stored table schema name must be {{'schema': ..., 'table': ...}}, not {name!r}"
            )
        if not isinstance(data["columns"], list):
            raise ValueError(f"stored table schema columns must be a list, not {data['columns']!r}")
        return cls(
            name=TableName(name["schema"], name["table"]),
            columns=tuple(Column.from_dict(c) for c in data["columns"]),
            primary_key=_as_tuple(data["primary_key"]),
            unique_keys=tuple(_as_tuple(key) for key in _as_tuple(data.get("unique_keys", ()))),
            version=data.get("version", 0),
        )
