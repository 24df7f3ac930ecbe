"""What a table can resume with after its changefeed followed the source to another server.

The binlog resumes by GTID (``cdc.binlog.puller``), and the stream recognises
every transaction read again (``Position.within``). What cannot follow yet is a
snapshot: its chunks' high watermarks are read by Spark tasks that know the
server but not the changefeed's generation, and the hand-off compares them
with the binlog's positions by file:offset. So, after a failover:

    the table still has snapshot chunks to read (first read, or again after a DDL),
    or its hand-off had not passed its last chunk's high watermark
        ──► fails closed (permanent), saying so and what to do
    otherwise ──► resumes from its checkpoint's GTID set
"""

from __future__ import annotations

from cdc.model.position import Position
from cdc.source.checks import ChangesUnavailable
from cdc.source.flavor import ServerInfo
from processor.handoff import HandoffGate

__all__ = ["check_resumable", "check_snapshot_allowed"]

_AGAIN = (
    "Re-create the changefeed (snapshot mode 'initial') to copy the table from the new "
    "server, or leave the table out of this changefeed's filter"
)


def check_snapshot_allowed(table: str, server: ServerInfo) -> None:
    """``ChangesUnavailable`` when ``table`` would read snapshot chunks on a server the
    changefeed followed a failover to (generation above 0)."""
    if server.generation > 0:
        raise ChangesUnavailable(
            f"table {table} has snapshot chunks to read, but its changefeed followed the "
            f"source to another server ({server.describe()}, after {server.generation} "
            "failover(s)); snapshot chunks are not read across a failover yet, since their "
            f"watermarks could not be placed against the binlog's positions. {_AGAIN}."
        )


def check_resumable(
    table: str,
    checkpoint: Position | None,
    server: ServerInfo,
    gate: HandoffGate | None,
    *,
    unsettled: bool,
) -> None:
    """``ChangesUnavailable`` when a checkpoint read on an earlier source cannot resume on
    ``server``: the table's snapshot hand-off was still open there (``gate`` not passed,
    or chunks waiting for a DDL: ``unsettled``)."""
    if checkpoint is None or checkpoint.gen >= server.generation:
        return
    open_handoff = gate is not None and (
        gate.pending or gate.end is None or checkpoint.key() < gate.end.key()
    )
    if open_handoff or unsettled:
        raise ChangesUnavailable(
            f"table {table} was handing its snapshot over to the binlog (checkpoint "
            f"{checkpoint}) when its changefeed followed the source to another server "
            f"({server.describe()}); the snapshot's watermarks belong to the old server and "
            f"cannot be placed against the new one's binlog. {_AGAIN}."
        )
