"""An operator's decision about the DDL the downstream refused: skip it or replace it.

Stored in the changefeed's status (``ddl_decision``) by ``cdcctl changefeed ddl
skip|replace`` and carried out by the owner when it reaches the DDL at exactly
``position`` again; the owner clears it when it records that DDL done. Value::

    {"position": Position, "action": "skip" | "replace", "sql": "..." | null, "at": unix time}
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.model.position import Position

__all__ = ["DdlAction", "DdlDecision"]


class DdlAction(enum.Enum):
    """``skip``: the DDL is not applied downstream; ``replace``: ``sql`` runs instead."""

    SKIP = "skip"
    REPLACE = "replace"


@dataclass(frozen=True)
class DdlDecision:
    """See the module docstring; ``sql`` is set exactly for ``replace``."""

    position: Position
    action: DdlAction
    sql: str | None
    at: float

    def __post_init__(self) -> None:
        if (self.action is DdlAction.REPLACE) != bool(self.sql):
            raise ValueError("a DDL decision carries SQL exactly when it replaces the DDL")

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position.to_dict(),
            "action": self.action.value,
            "sql": self.sql,
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DdlDecision:
        return cls(
            Position.from_dict(data["position"]),
            DdlAction(data["action"]),
            None if data.get("sql") is None else str(data["sql"]),
            float(data["at"]),
        )
