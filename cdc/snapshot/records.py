"""A snapshot chunk's record in etcd (``snapshot/<changefeed>/<table>/<n>``): its state and
high watermark. The processor writes them (``cdc.changefeed.snapshot_progress``); the owner
reads them to tell whether a table's snapshot is settled at a DDL.

Value: {"chunk": SnapshotChunk.to_dict(), "state": "pending"|"done",
"high_watermark": Position.to_dict()|null, "rows": int, "planned_at": s, "finished_at": s|null,
"request": id} (``request`` only in the chunks of an operator's re-snapshot of a streaming
table, ``cdc.changefeed.snapshot_request``: not a hand-off plan).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from cdc.model.position import Position
from cdc.snapshot.chunk import SnapshotChunk

__all__ = ["ChunkRecord", "ChunkState", "settled_at"]


class ChunkState(enum.Enum):
    """pending ──(rows durable in the sink, high watermark recorded)──► done.

    done ──(a DDL of the table at or before its high watermark: ``reopen``)──► pending.
    """

    PENDING = "pending"
    DONE = "done"


@dataclass(frozen=True)
class ChunkRecord:
    chunk: SnapshotChunk
    state: ChunkState
    high_watermark: Position | None
    rows: int
    planned_at: float
    finished_at: float | None
    #: The re-snapshot request the chunk belongs to; None for a table's own snapshot.
    request: str | None = None

    @property
    def done(self) -> bool:
        return self.state is ChunkState.DONE

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunk": self.chunk.to_dict(),
            "state": self.state.value,
            "high_watermark": self.high_watermark.to_dict() if self.high_watermark else None,
            "rows": self.rows,
            "planned_at": self.planned_at,
            "finished_at": self.finished_at,
            **({} if self.request is None else {"request": self.request}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChunkRecord:
        hw = data.get("high_watermark")
        return cls(
            chunk=SnapshotChunk.from_dict(data["chunk"]),
            state=ChunkState(data["state"]),
            high_watermark=Position.from_dict(hw) if hw else None,
            rows=int(data.get("rows", 0)),
            planned_at=float(data["planned_at"]),
            finished_at=data.get("finished_at"),
            request=data.get("request"),
        )


def settled_at(records: list[ChunkRecord], position: Position) -> bool:
    """Whether every chunk was read (validly) before a DDL of the table at ``position``:
    done, with its high watermark before it (docs/ddl-during-snapshot.md)."""
    key = position.key()
    return all(
        r.done and r.high_watermark is not None and r.high_watermark.key() < key for r in records
    )
