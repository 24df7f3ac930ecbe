"""A changefeed's status in etcd: its state, positions, errors and skipped DDL.

Written by the owner (fenced) and, for pause and resume only, by the
lifecycle API (``ChangefeedStore``); always as a compare-and-swap, so the two
never overwrite each other. Value (``changefeed/status/<cf>``)::

    {"v": 1, "state": "normal",
     "start": {"position": {...}} | {"gtid": "0-1-7", "flavor": "mariadb"} | null,
     "checkpoint": Position | null,   every change up to here is in the sink
     "resolved": Position | null,     the owner's DDL puller has seen everything up to here
     "ddl_position": Position | null, the last DDL applied (or skipped) downstream
     "schema_version": int,           number of DDLs applied so far
     "error": {"message", "at", "table", "permanent", "ddl"?} | null,
                                      "ddl" (BarrierDdl) when the downstream refused that DDL
     "error_history": [unix time, ...],   errors in the retry window (backoff)
     "retry_at": unix time | null,        when the owner retries an error
     "skipped_ddl": [{"position", "kind", "statement", "reason", "at"}, ...],
     "source": {...} | absent,        the server read and its generation (source_record.py)
     "tables_update": {...} | absent, new table rules the owner has yet to apply
     "last_tables_update": {...} | absent, what it did with the last one (table_update.py)
     "removed_at": {"db.t": 1764000000.0} | absent, tables held back from being added (300 s)
     "ddl_decision": {...} | absent,  an operator's skip / replace of the refused DDL, until
                                      the owner carries it out (ddl_decision.py)
     "updated_at": unix time}
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.changefeed.barrier import BarrierDdl
from cdc.changefeed.ddl_decision import DdlDecision
from cdc.changefeed.points import (
    StartPoint,
    point_from_dict,
    point_to_dict,
    position_from,
    position_to,
)
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.state import ChangefeedState
from cdc.changefeed.table_update import TablesUpdate, TablesUpdateResult
from cdc.model.position import Position

__all__ = ["SKIPPED_DDL_KEPT", "ChangefeedStatus", "ErrorInfo", "SkippedDdl"]

#: How many skipped DDL events the status keeps (the newest).
SKIPPED_DDL_KEPT = 20


@dataclass(frozen=True)
class ErrorInfo:
    """The last error of a changefeed: what, when, where (a table, or the owner).

    ``ddl``: the DDL the downstream refused, when that is the error (what an operator
    may skip or replace, ``cdc.changefeed.ddl_ops``)."""

    message: str
    at: float
    table: str | None = None
    permanent: bool = False
    ddl: BarrierDdl | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "at": self.at,
            "table": self.table,
            "permanent": self.permanent,
            **({} if self.ddl is None else {"ddl": self.ddl.to_dict()}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ErrorInfo:
        ddl = data.get("ddl")
        return cls(
            str(data["message"]),
            float(data["at"]),
            data.get("table"),
            bool(data.get("permanent", False)),
            None if ddl is None else BarrierDdl.from_dict(ddl),
        )


@dataclass(frozen=True)
class SkippedDdl:
    """A DDL the owner did not apply downstream, and why (unsupported kind, event filter)."""

    position: Position
    kind: str
    statement: str
    reason: str
    at: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position.to_dict(),
            "kind": self.kind,
            "statement": self.statement,
            "reason": self.reason,
            "at": self.at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SkippedDdl:
        return cls(
            Position.from_dict(data["position"]),
            str(data["kind"]),
            str(data["statement"]),
            str(data["reason"]),
            float(data["at"]),
        )


@dataclass(frozen=True)
class ChangefeedStatus:
    """See the module docstring; ``with_*`` methods return changed copies."""

    state: ChangefeedState = ChangefeedState.NORMAL
    start: StartPoint | None = None
    checkpoint: Position | None = None
    resolved: Position | None = None
    ddl_position: Position | None = None
    schema_version: int = 0
    error: ErrorInfo | None = None
    error_history: tuple[float, ...] = ()
    retry_at: float | None = None
    skipped_ddl: tuple[SkippedDdl, ...] = ()
    updated_at: float = field(default_factory=time.time)
    source: SourceRecord | None = None
    tables_update: TablesUpdate | None = None
    last_tables_update: TablesUpdateResult | None = None
    ddl_decision: DdlDecision | None = None
    #: table -> when an update removed it with a share of its snapshot stopped on a live
    #: capture, kept for ``READD_HOLD_SECONDS`` (owner/removals.py)
    removed_at: Mapping[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "state": self.state.value,
            "start": None if self.start is None else point_to_dict(self.start),
            "checkpoint": position_to(self.checkpoint),
            "resolved": position_to(self.resolved),
            "ddl_position": position_to(self.ddl_position),
            "schema_version": self.schema_version,
            "error": None if self.error is None else self.error.to_dict(),
            "error_history": list(self.error_history),
            "retry_at": self.retry_at,
            "skipped_ddl": [s.to_dict() for s in self.skipped_ddl],
            "updated_at": self.updated_at,
            **({} if self.source is None else {"source": self.source.to_dict()}),
            **(
                {}
                if self.tables_update is None
                else {"tables_update": self.tables_update.to_dict()}
            ),
            **(
                {}
                if self.last_tables_update is None
                else {"last_tables_update": self.last_tables_update.to_dict()}
            ),
            **({} if self.ddl_decision is None else {"ddl_decision": self.ddl_decision.to_dict()}),
            **({} if not self.removed_at else {"removed_at": dict(self.removed_at)}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangefeedStatus:
        """Reads what ``to_dict`` wrote, switching on ``"v"``."""
        if data.get("v") != 1:
            raise ValueError(f"unsupported changefeed status format version {data.get('v')!r}")
        try:
            state = ChangefeedState(data["state"])
        except (KeyError, ValueError):
            raise ValueError(
                f"changefeed status has no valid state: {data.get('state')!r}; "
                f"expected one of {[s.value for s in ChangefeedState]}"
            ) from None
        start = data.get("start")
        error = data.get("error")
        return cls(
            state=state,
            start=None if start is None else point_from_dict(start),
            checkpoint=position_from(data.get("checkpoint")),
            resolved=position_from(data.get("resolved")),
            ddl_position=position_from(data.get("ddl_position")),
            schema_version=int(data.get("schema_version", 0)),
            error=None if error is None else ErrorInfo.from_dict(error),
            error_history=tuple(float(t) for t in data.get("error_history", ())),
            retry_at=data.get("retry_at"),
            skipped_ddl=tuple(SkippedDdl.from_dict(s) for s in data.get("skipped_ddl", ())),
            updated_at=float(data.get("updated_at", 0.0)),
            source=None if data.get("source") is None else SourceRecord.from_dict(data["source"]),
            tables_update=None
            if data.get("tables_update") is None
            else TablesUpdate.from_dict(data["tables_update"]),
            last_tables_update=None
            if data.get("last_tables_update") is None
            else TablesUpdateResult.from_dict(data["last_tables_update"]),
            ddl_decision=None
            if data.get("ddl_decision") is None
            else DdlDecision.from_dict(data["ddl_decision"]),
            removed_at={str(t): float(at) for t, at in data.get("removed_at", {}).items()},
        )

    def changed(self, **changes: Any) -> ChangefeedStatus:
        """A copy with ``changes`` and a fresh ``updated_at``."""
        return replace(self, **changes, updated_at=time.time())

    def with_skipped(self, skipped: SkippedDdl) -> ChangefeedStatus:
        """A copy that also records ``skipped`` (keeping the newest ``SKIPPED_DDL_KEPT``)."""
        kept = (*self.skipped_ddl, skipped)[-SKIPPED_DDL_KEPT:]
        return self.changed(skipped_ddl=kept)
