"""The barrier of a changefeed: how far its table pipelines may deliver.

``barrier/<cf>`` is written by the owner only (fenced). Every table pipeline
delivers the events at or before ``limit`` and then waits for the barrier to
move::

    kind "ddl":      limit = the resolved position just before the next DDL;
                     the owner applies that DDL once the changefeed checkpoint
                     has reached the limit, then moves the barrier on
    kind "resolved": no DDL ahead; limit = the newest position the owner's DDL
                     puller has seen (the design's "+infinity")
    kind "target":   the changefeed's target position is next; at the limit
                     the changefeed is finished

The limit never moves backwards. Value::

    {"v": 1, "kind": "ddl", "limit": Position,
     "ddl": {"position": Position, "kind": "add column", "statement": "...",
             "tables": ["shop.orders"]} | null}
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.model.events import DdlEvent
from cdc.model.position import Position

__all__ = ["Barrier", "BarrierDdl", "BarrierKind"]


class BarrierKind(enum.Enum):
    DDL = "ddl"
    RESOLVED = "resolved"
    TARGET = "target"


@dataclass(frozen=True)
class BarrierDdl:
    """The DDL a barrier waits for, as operators read it in ``barrier/<cf>``."""

    position: Position
    kind: str
    statement: str
    tables: tuple[str, ...]

    @classmethod
    def of(cls, ddl: DdlEvent) -> BarrierDdl:
        return cls(ddl.position, ddl.kind.value, ddl.statement, tuple(str(t) for t in ddl.tables))

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position.to_dict(),
            "kind": self.kind,
            "statement": self.statement,
            "tables": list(self.tables),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BarrierDdl:
        return cls(
            Position.from_dict(data["position"]),
            str(data["kind"]),
            str(data["statement"]),
            tuple(str(t) for t in data.get("tables", ())),
        )


@dataclass(frozen=True)
class Barrier:
    """See the module docstring."""

    kind: BarrierKind
    limit: Position
    ddl: BarrierDdl | None = None

    def allows(self, position: Position) -> bool:
        """Whether a pipeline may deliver an event at ``position`` now: at or before the
        limit, or, read on a later source after a failover, a transaction the limit's GTID
        set holds (``Position.within``): a reader stalled here reports the limit as its
        tables' position, so what it holds back must lie beyond the limit."""
        return position.key() <= self.limit.key() or (
            position.gen != self.limit.gen and position.within(self.limit)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "kind": self.kind.value,
            "limit": self.limit.to_dict(),
            "ddl": None if self.ddl is None else self.ddl.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Barrier:
        """Reads what ``to_dict`` wrote, switching on ``"v"``."""
        if data.get("v") != 1:
            raise ValueError(f"unsupported barrier format version {data.get('v')!r}")
        ddl = data.get("ddl")
        return cls(
            BarrierKind(data["kind"]),
            Position.from_dict(data["limit"]),
            None if ddl is None else BarrierDdl.from_dict(ddl),
        )
