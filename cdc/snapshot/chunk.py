"""``SnapshotChunk``: one key range of one table, the unit of snapshot work and resume.

A chunk covers the rows whose chunk-key column value ``v`` satisfies
``lower <= v < upper``; a missing bound (``None``) is unbounded. The first
chunk of a table (``lower is None``) also holds the rows whose chunk-key value
is NULL, since MySQL sorts NULL first: so the chunks of a table cover every
row exactly once, including rows inserted outside the range seen at split
time.

Bounds are canonical values (``cdc.typeconv``): ``int``, ``Decimal``,
``float``, ``str``, ``bytes``, ``date``, ``datetime`` (naive for DATETIME,
aware UTC for TIMESTAMP), ``timedelta`` (TIME) and ``RawDate`` /
``RawDateTime`` (zero dates). They always reach SQL as query parameters
(:meth:`SnapshotChunk.where_clause`), so the server compares them, in the
column's collation for text.

Text is never ordered in Python: ``'a' = 'A'`` and ``'e' = 'é'`` in most
collations, and trailing spaces do not count in PAD SPACE ones. So
:meth:`SnapshotChunk.contains` takes the comparison to use and refuses text
without one (the reader passes ``cdc.snapshot.keyorder.ServerTextOrder``).

Chunks are persisted (etcd) through :meth:`to_dict` / :meth:`from_dict`, which
carry ``"v": 1`` and tag every bound with its type so it comes back exactly.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from cdc.model.schema import Column, TableName
from cdc.snapshot.keyorder import python_compare
from cdc.store.keys import chunk_id as make_chunk_id
from cdc.store.keys import parse_chunk_id, table_name
from cdc.typeconv import RawDate, RawDateTime, to_sql_param

__all__ = ["FORMAT_VERSION", "Compare", "SnapshotChunk", "parse_chunk_id", "reading_order"]

FORMAT_VERSION = 1

Compare = Callable[[Any, Any], int]
"""``compare(a, b)``: negative, zero or positive as ``a`` sorts before, with or after ``b``."""

# Canonical values that PyMySQL would not write back exactly get a synthetic
# column so typeconv (the one owner of that mapping) converts them.
_TIME = Column("bound", "time", "time(6)")
_TIMESTAMP = Column("bound", "timestamp", "timestamp(6)")
_BOUND_TYPES = (int, Decimal, float, str, bytes, date, timedelta, RawDate, RawDateTime)


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def sql_param(value: Any) -> Any:
    """A canonical bound as a PyMySQL parameter the server reads back as the same value."""
    if isinstance(value, RawDate | RawDateTime):
        return str(value)
    if isinstance(value, timedelta):
        return to_sql_param(_TIME, value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return to_sql_param(_TIMESTAMP, value)
    return value


@dataclass(frozen=True)
class SnapshotChunk:
    """Chunk ``n`` of ``table``: rows with ``lower <= key_column < upper`` (None: unbounded).

    ``chunk_id`` is ``schema.table:n`` (``cdc.store.keys.chunk_id``); chunk
    numbers are 0, 1, 2, ... in key order.
    """

    table: TableName
    n: int
    key_column: str
    lower: Any | None = None
    upper: Any | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.table, TableName):
            raise ValueError(f"chunk table must be a TableName, not {self.table!r}")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 0:
            raise ValueError(f"chunk number of {self.table} must be an int >= 0, not {self.n!r}")
        if not isinstance(self.key_column, str) or not self.key_column:
            raise ValueError(f"chunk {self.table}:{self.n} needs a key column name")
        for label, bound in (("lower", self.lower), ("upper", self.upper)):
            if bound is not None and (
                isinstance(bound, bool) or not isinstance(bound, _BOUND_TYPES)
            ):
                raise ValueError(
                    f"chunk {self.table}:{self.n}: {label} bound {bound!r} is a "
                    f"{type(bound).__name__}; bounds are canonical column values "
                    "(int, Decimal, float, str, bytes, date, datetime, timedelta, RawDate)"
                )
        if (
            self.lower is not None
            and self.upper is not None
            and not isinstance(self.lower, str)
            and not isinstance(self.upper, str)
            and python_compare(self.lower, self.upper) >= 0
        ):
            raise ValueError(
                f"chunk {self.table}:{self.n}: lower bound {self.lower!r} must be below "
                f"upper bound {self.upper!r}"
            )

    @property
    def chunk_id(self) -> str:
        """``schema.table:n``; read back with ``parse_chunk_id``."""
        return make_chunk_id(table_name(self.table.schema, self.table.table), self.n)

    @property
    def unbounded(self) -> bool:
        """True for the one chunk of a table that is read whole."""
        return self.lower is None and self.upper is None

    def contains(self, value: Any, compare: Compare | None = None) -> bool:
        """Whether a row whose chunk-key column holds ``value`` belongs to this chunk.

        ``compare`` orders two values as the server does; the default orders
        numbers, bytes and temporal values and refuses text (pass the column's
        collation order, e.g. ``ServerTextOrder``). NULL belongs to the first chunk.
        """
        if value is None:
            return self.lower is None
        order = compare or python_compare
        if self.lower is not None and order(value, self.lower) < 0:
            return False
        return self.upper is None or order(value, self.upper) < 0

    def where_clause(self) -> tuple[str, tuple[Any, ...]]:
        """``(sql, params)`` selecting this chunk's rows: ``%s`` placeholders for PyMySQL.

        ``%`` in the column name is doubled, so the text is safe to pass with
        parameters; ``1=1`` when the chunk is unbounded.
        """
        column = _quote(self.key_column).replace("%", "%%")
        lower = None if self.lower is None else sql_param(self.lower)
        upper = None if self.upper is None else sql_param(self.upper)
        if lower is None and upper is None:
            return "1=1", ()
        if lower is None:
            return f"({column} < %s OR {column} IS NULL)", (upper,)
        if upper is None:
            return f"{column} >= %s", (lower,)
        return f"{column} >= %s AND {column} < %s", (lower, upper)

    def describe(self) -> str:
        """``db.t:3 [10, 20)`` for log lines (bounds shortened)."""
        low = "-inf" if self.lower is None else _short(self.lower)
        high = "+inf" if self.upper is None else _short(self.upper)
        return f"{self.chunk_id} {self.key_column} [{low}, {high})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict carrying ``"v": 1``; bounds tagged with their type."""
        return {
            "v": FORMAT_VERSION,
            "table": {"schema": self.table.schema, "table": self.table.table},
            "n": self.n,
            "key_column": self.key_column,
            "lower": encode_bound(self.lower),
            "upper": encode_bound(self.upper),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SnapshotChunk:
        """Read what :meth:`to_dict` wrote, switching on the format version ``"v"``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored snapshot chunk must be a JSON object, not {data!r}")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"unsupported snapshot chunk format version {version!r} "
                f"(this build reads version {FORMAT_VERSION}): {dict(data)!r}"
            )
        missing = [k for k in ("table", "n", "key_column", "lower", "upper") if k not in data]
        if missing:
            raise ValueError(f"stored snapshot chunk lacks {', '.join(missing)}: {dict(data)!r}")
        table = data["table"]
        if not isinstance(table, Mapping) or set(table) != {"schema", "table"}:
            raise ValueError(
                f"stored snapshot chunk table must be {{'schema': ..., 'table': ...}}, "
                f"not {table!r}"
            )
        return cls(
            TableName(table["schema"], table["table"]),
            data["n"],
            data["key_column"],
            decode_bound(data["lower"]),
            decode_bound(data["upper"]),
        )


def reading_order(chunks: Sequence[SnapshotChunk]) -> list[SnapshotChunk]:
    """``chunks`` in the order to read them: the one open above (the plan's tail) first.

    Rows inserted above the highest key the plan saw all land in the tail; read first,
    it holds those inserted since the plan, not those of the whole snapshot's duration
    (``cdc.snapshot.splitter``). The others keep their order.
    """
    return sorted(chunks, key=lambda chunk: chunk.upper is not None)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def encode_bound(value: Any) -> dict[str, Any] | None:
    """One bound as ``{"type": ..., "value": ...}`` JSON that :func:`decode_bound` reverses."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"a chunk bound cannot be a bool ({value!r})")
    if isinstance(value, int):
        return {"type": "int", "value": value}
    if isinstance(value, Decimal):
        return {"type": "decimal", "value": str(value)}
    if isinstance(value, float):
        return {"type": "float", "value": value.hex()}
    if isinstance(value, str):
        return {"type": "str", "value": value}
    if isinstance(value, bytes):
        return {"type": "bytes", "value": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        kind = "datetime" if value.tzinfo is None else "timestamp"
        return {"type": kind, "value": value.isoformat()}
    if isinstance(value, date):
        return {"type": "date", "value": value.isoformat()}
    if isinstance(value, timedelta):
        return {"type": "time", "value": value // timedelta(microseconds=1)}
    if isinstance(value, RawDateTime):
        parts = [
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        ]
        return {"type": "raw_datetime", "value": parts}
    if isinstance(value, RawDate):
        return {"type": "raw_date", "value": [value.year, value.month, value.day]}
    raise ValueError(f"cannot store a chunk bound of type {type(value).__name__}: {value!r}")


def _strict_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a JSON integer, not {value!r}")
    return value


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "int": _strict_int,
    "decimal": Decimal,
    "float": float.fromhex,
    "str": str,
    "bytes": lambda text: base64.b64decode(text.encode("ascii"), validate=True),
    "datetime": datetime.fromisoformat,
    "timestamp": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": lambda micros: timedelta(microseconds=micros),
    "raw_date": lambda parts: RawDate(*parts),
    "raw_datetime": lambda parts: RawDateTime(*parts),
}


def decode_bound(data: Any) -> Any:
    """The bound :func:`encode_bound` stored."""
    if data is None:
        return None
    if not isinstance(data, Mapping) or set(data) != {"type", "value"}:
        raise ValueError(
            f"a stored chunk bound must be {{'type': ..., 'value': ...}}, not {data!r}"
        )
    decoder = _DECODERS.get(data["type"])
    if decoder is None:
        raise ValueError(
            f"stored chunk bound has unknown type {data['type']!r}; "
            f"known types: {', '.join(sorted(_DECODERS))}"
        )
    try:
        return decoder(data["value"])
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ValueError(f"stored chunk bound {dict(data)!r} is malformed: {exc}") from None
