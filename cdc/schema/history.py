"""The schema of every table at every binlog position since the horizon.

A table's history is a list of versions, each stamped with the position of
the DDL that made it (or the start position for the initial schemas)::

    start s          DDL at p1            DDL at p2
    ───●───────────────●────────────────────●──────────▶ binlog
       v0 (loaded)     v1                   None (dropped)
     at(q) = v0 for s <= q <= p1,  v1 for p1 < q <= p2,  None after p2

A DDL at position p applies to the events *after* p (the DDL event itself is
at p), hence the strict ``<`` in :meth:`SchemaHistory.at`. Versions stamped at
or before the horizon (the start position, later the last ``gc`` checkpoint)
are in force from the horizon on; positions before the horizon cannot be
answered and raise.

``gc(checkpoint)`` keeps, per table, the version in force at the checkpoint
and everything newer, and forgets tables dropped before it. Versions of one
table name only grow, across drops and re-creates too, so a row's
``schema_version`` never names two shapes.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from cdc.model import DdlEvent, Flavor, Position, TableName, TableSchema
from cdc.schema.ddl import apply_ddl

__all__ = ["FORMAT_VERSION", "SchemaHistory"]

FORMAT_VERSION = 1

log = logging.getLogger(__name__)


class _Versions:
    """One table's versions, ordered by position; ``None`` marks the table dropped."""

    __slots__ = ("keys", "positions", "schemas")

    def __init__(self) -> None:
        self.positions: list[Position] = []
        self.keys: list[tuple[int, int]] = []
        self.schemas: list[TableSchema | None] = []

    def add(self, position: Position, schema: TableSchema | None) -> None:
        self.positions.append(position)
        self.keys.append(position.key())
        self.schemas.append(schema)

    def index_at(self, position: Position, horizon: Position) -> int | None:
        """Index of the version in force at ``position`` (which is >= the horizon)."""
        i = bisect.bisect_left(self.keys, position.key()) - 1
        if i >= 0:
            return i
        if self.keys and self.keys[0] <= horizon.key():
            return 0
        return None

    def latest(self) -> TableSchema | None:
        return self.schemas[-1] if self.schemas else None

    def highest_version(self) -> int:
        return max((s.version for s in self.schemas if s is not None), default=-1)


class SchemaHistory:
    """Table schemas over binlog positions: initial schemas plus every DDL, in order.

    Not thread-safe; the owner's DDL puller is its only writer.
    """

    def __init__(self, horizon: Position, flavor: Flavor = Flavor.MARIADB) -> None:
        """An empty history; most callers want :meth:`initial` or :meth:`from_dict`."""
        if not isinstance(horizon, Position):
            raise TypeError(f"horizon must be a Position, not {horizon!r}")
        if not isinstance(flavor, Flavor):
            raise TypeError(f"flavor must be a Flavor, not {flavor!r}")
        self._horizon = horizon
        self._last = horizon
        self._flavor = flavor
        self._tables: dict[TableName, _Versions] = {}
        self._current: dict[TableName, TableSchema] = {}

    @classmethod
    def initial(
        cls,
        schemas: Mapping[TableName, TableSchema],
        position: Position,
        *,
        flavor: Flavor = Flavor.MARIADB,
    ) -> SchemaHistory:
        """The history starting with ``schemas`` as read at ``position``.

        ``flavor`` is the source's (``cdc.source.flavor.detect``): DDL-made columns
        are spelled the way that server spells them.
        """
        history = cls(position, flavor)
        for name, schema in schemas.items():
            if not isinstance(schema, TableSchema) or schema.name != name:
                raise ValueError(f"initial schema for {name} must be a TableSchema named {name}")
            history._record(name, position, schema)
        return history

    @property
    def horizon(self) -> Position:
        """The oldest position this history can answer for."""
        return self._horizon

    @property
    def last_position(self) -> Position:
        """The position of the last applied DDL (the start position before any)."""
        return self._last

    @property
    def flavor(self) -> Flavor:
        return self._flavor

    def apply(self, event: DdlEvent) -> None:
        """Apply the next DDL; it must come after every DDL applied so far.

        Raises ``ValueError`` for an event at or before :attr:`last_position`
        or before the horizon (a replayed or reordered stream), and
        ``DdlApplyError`` when the DDL does not fit the history.
        """
        if not isinstance(event, DdlEvent):
            raise TypeError(f"expected a DdlEvent, not {event!r}")
        if event.position <= self._last or event.position < self._horizon:
            raise ValueError(
                f"DDL at {event.position} is not after the last applied position {self._last} "
                f"(horizon {self._horizon}); events must be applied once each, in binlog order"
            )
        after = apply_ddl(self._current, event, flavor=self._flavor)
        changed = [
            t for t in self._current.keys() | after.keys() if after.get(t) != self._current.get(t)
        ]
        self._last = event.position
        for name in sorted(changed, key=str):
            schema = after.get(name)
            if schema is not None:
                schema = self._next_version(name, schema)
            self._record(name, event.position, schema)
        if changed:
            log.info(
                "schema history: %s at %s changed %s",
                event.kind.value,
                event.position,
                ", ".join(str(t) for t in sorted(changed, key=str)),
            )

    def _next_version(self, name: TableName, schema: TableSchema) -> TableSchema:
        versions = self._tables.get(name)
        floor = versions.highest_version() + 1 if versions is not None else 0
        return schema if schema.version >= floor else dataclasses.replace(schema, version=floor)

    def _record(self, name: TableName, position: Position, schema: TableSchema | None) -> None:
        self._tables.setdefault(name, _Versions()).add(position, schema)
        if schema is None:
            self._current.pop(name, None)
        else:
            self._current[name] = schema

    def _check(self, position: Position) -> None:
        if not isinstance(position, Position):
            raise TypeError(f"expected a Position, not {position!r}")
        if position < self._horizon:
            raise ValueError(
                f"position {position} is before the schema history's horizon {self._horizon}; "
                "versions that old were never known or were dropped by gc"
            )

    def at(self, table: TableName, position: Position) -> TableSchema | None:
        """The schema of ``table`` for an event at ``position``; None if it did not exist.

        A DDL at position p is in force for events after p, not at p.
        """
        self._check(position)
        versions = self._tables.get(table)
        if versions is None:
            return None
        i = versions.index_at(position, self._horizon)
        return None if i is None else versions.schemas[i]

    def current(self, table: TableName) -> TableSchema | None:
        """The newest schema of ``table``; None if it does not exist now."""
        return self._current.get(table)

    def tables_at(self, position: Position) -> dict[TableName, TableSchema]:
        """Every table existing at ``position``, with its schema there."""
        self._check(position)
        result: dict[TableName, TableSchema] = {}
        for name, versions in self._tables.items():
            i = versions.index_at(position, self._horizon)
            schema = None if i is None else versions.schemas[i]
            if schema is not None:
                result[name] = schema
        return result

    def gc(self, checkpoint: Position) -> int:
        """Forget versions no longer needed once everything up to ``checkpoint`` is delivered.

        Keeps the version in force at the checkpoint and all newer ones; a
        checkpoint at or before the horizon changes nothing. Returns the
        number of versions dropped.
        """
        if not isinstance(checkpoint, Position):
            raise TypeError(f"expected a Position, not {checkpoint!r}")
        if checkpoint <= self._horizon:
            return 0
        dropped = 0
        for name in list(self._tables):
            versions = self._tables[name]
            i = versions.index_at(checkpoint, self._horizon)
            if i is None or i == 0:
                continue
            del versions.positions[:i]
            del versions.keys[:i]
            del versions.schemas[:i]
            dropped += i
            if versions.schemas == [None]:
                del self._tables[name]
                dropped += 1
        self._horizon = checkpoint
        return dropped

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with ``"v": 1``; :meth:`from_dict` reads it back."""
        return {
            "v": FORMAT_VERSION,
            "flavor": self._flavor.value,
            "horizon": self._horizon.to_dict(),
            "last": self._last.to_dict(),
            "tables": [
                {
                    "name": {"schema": name.schema, "table": name.table},
                    "versions": [
                        {
                            "position": position.to_dict(),
                            "schema": None if schema is None else schema.to_dict(),
                        }
                        for position, schema in zip(
                            versions.positions, versions.schemas, strict=True
                        )
                    ],
                }
                for name, versions in sorted(self._tables.items(), key=lambda item: str(item[0]))
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchemaHistory:
        """Read what :meth:`to_dict` wrote, switching on the format version ``"v"``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a stored schema history must be a JSON object, not {type(data)}")
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"unsupported schema history format version {version!r} "
                f"(this build reads version {FORMAT_VERSION})"
            )
        missing = [k for k in ("flavor", "horizon", "last", "tables") if k not in data]
        if missing:
            raise ValueError(f"stored schema history lacks {', '.join(missing)}")
        try:
            flavor = Flavor(data["flavor"])
        except ValueError:
            raise ValueError(
                f"stored schema history has unknown flavor {data['flavor']!r}; "
                f"expected one of {[f.value for f in Flavor]}"
            ) from None
        history = cls(Position.from_dict(data["horizon"]), flavor)
        last = Position.from_dict(data["last"])
        if last < history._horizon:
            raise ValueError(f"stored schema history: last {last} is before horizon")
        for entry in data["tables"]:
            name = TableName(entry["name"]["schema"], entry["name"]["table"])
            previous: Position | None = None
            for item in entry["versions"]:
                position = Position.from_dict(item["position"])
                if previous is not None and position <= previous:
                    raise ValueError(f"stored schema history: versions of {name} out of order")
                previous = position
                stored = item["schema"]
                schema = None if stored is None else TableSchema.from_dict(stored)
                if schema is not None and schema.name != name:
                    raise ValueError(
                        f"stored schema history: a version of {name} is named {schema.name}"
                    )
                history._record(name, position, schema)
        history._last = last
        return history
