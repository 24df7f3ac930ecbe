"""An operator's re-snapshot of one streaming table (``cdcctl changefeed snapshot``).

    admin API ──create──► snapshot-request/<cf>/<table>   state requested
                              │  (create-only, or over a request that ended)
    the capture holding ◄─────┘
    the table (processor/resnapshot.py): plans the chunks as the table's chunk
    records (``snapshot/<cf>/<table>/<n>``, each naming the request), state running
        │ runs them through its snapshot scheduler, the table's binlog stream going on
        ▼
    done (every chunk recorded) | failed (error kept; run it again)

A request that is requested or running is *active*: a second one for the same table
is refused, and a capture that takes the table over (moved, restarted) resumes its
pending chunks. The owner deletes the key with the table's task.

Value::

    {"v": 1, "id": "6f0c...", "table": "shop.orders", "where": "id < 100" | null,
     "state": "requested" | "running" | "done" | "failed", "by": "alice (admin) from ...",
     "requested_at": s, "started_at": s | null, "finished_at": s | null,
     "chunks": int, "rows": int, "error": str | null}
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdc.changefeed.table_entries import TableEntry
from cdc.changefeed.tables import TableState, TaskState
from cdc.config.changefeed import ChangefeedConfig
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.model.schema import TableName
from cdc.sink.registry import kind_of
from cdc.snapshot.records import ChunkRecord
from cdc.store import Absent, EtcdStore, ModRevisionIs, Put
from cdc.store.keys import SnapshotRequestKey

__all__ = [
    "RequestState",
    "SnapshotRequest",
    "SnapshotRequests",
    "TableSnapshotting",
    "not_ready",
    "refusal",
]


class TableSnapshotting(RuntimeError):
    """A re-snapshot of the table is requested or running already."""


class RequestState(enum.Enum):
    """requested ──(planned by the capture holding the table)──► running ──► done
                                                                    └──────► failed

    A requested or running request survives its capture: the next holder of the table
    plans it (requested) or runs its pending chunks (running).
    """

    REQUESTED = "requested"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class SnapshotRequest:
    """One re-snapshot of ``table``: the rows ``where`` selects (None: every row)."""

    request_id: str
    table: TableName
    where: str | None
    state: RequestState
    by: str
    requested_at: float
    started_at: float | None = None
    finished_at: float | None = None
    chunks: int = 0
    rows: int = 0
    error: str | None = None

    @property
    def active(self) -> bool:
        """Whether it still has work to do (a second request is refused meanwhile)."""
        return self.state in (RequestState.REQUESTED, RequestState.RUNNING)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.request_id,
            "table": str(self.table),
            "where": self.where,
            "state": self.state.value,
            "by": self.by,
            "requested_at": self.requested_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "chunks": self.chunks,
            "rows": self.rows,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SnapshotRequest:
        return cls(
            request_id=str(data["id"]),
            table=TableName.parse(str(data["table"])),
            where=data.get("where"),
            state=RequestState(data["state"]),
            by=str(data.get("by", "")),
            requested_at=float(data["requested_at"]),
            started_at=data.get("started_at"),
            finished_at=data.get("finished_at"),
            chunks=int(data.get("chunks", 0)),
            rows=int(data.get("rows", 0)),
            error=data.get("error"),
        )


class SnapshotRequests:
    """The re-snapshot requests of one changefeed in etcd."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id
        self.log = get_logger(__name__, changefeed=changefeed_id)

    def key(self, table: TableName) -> SnapshotRequestKey:
        return self.store.keys.snapshot_request(self.changefeed_id, str(table))

    def prefix(self) -> str:
        return self.store.keys.prefix_of(SnapshotRequestKey, self.changefeed_id)

    def get(self, table: TableName) -> SnapshotRequest | None:
        item = self.store.get(self.key(table))
        return None if item is None else SnapshotRequest.from_dict(item.json())

    def all(self) -> list[SnapshotRequest]:
        """Every table's last request (one range read)."""
        return [SnapshotRequest.from_dict(i.json()) for i in self.store.get_prefix(self.prefix())]

    def create(self, table: TableName, where: str | None, by: str) -> SnapshotRequest:
        """A new request (state requested); ``TableSnapshotting`` if one is active.

        Create-only, or a compare-and-swap over the request that ended, so two
        operators asking at once get one request and one refusal.
        """
        key = self.key(table)
        item = self.store.get(key)
        if item is not None:
            old = SnapshotRequest.from_dict(item.json())
            if old.active:
                raise _snapshotting(old)
        request = SnapshotRequest(
            uuid.uuid4().hex[:12], table, where, RequestState.REQUESTED, by, time.time()
        )
        condition = Absent(key) if item is None else ModRevisionIs(key, item.mod_revision)
        if not self.store.txn([condition], [Put(key, request.to_dict())]):
            now = self.get(table)
            if now is not None and now.active:
                raise _snapshotting(now)
            raise TableSnapshotting(
                f"table {table}: another re-snapshot request was written at the same time; "
                "look at `cdcctl changefeed query` and ask again if it is not there"
            )
        self.log.info(
            "re-snapshot %s of %s requested by %s%s",
            request.request_id,
            table,
            by,
            f" where {where}" if where else "",
        )
        return request

    def change(
        self, table: TableName, request_id: str, fn: Callable[[SnapshotRequest], SnapshotRequest]
    ) -> SnapshotRequest | None:
        """Applies ``fn`` to the request if it is still ``request_id`` (compare-and-swap,
        retried); None when the key now holds another request or none."""
        result: dict[str, SnapshotRequest] = {}

        def apply(old: dict[str, Any] | None) -> dict[str, Any] | None:
            if old is None:
                return None
            current = SnapshotRequest.from_dict(old)
            if current.request_id != request_id:
                return old
            new = fn(current)
            result["request"] = new
            return new.to_dict()

        self.store.update(self.key(table), apply)
        return result.get("request")

    def running(self, table: TableName, request_id: str, chunks: int) -> SnapshotRequest | None:
        def start(r: SnapshotRequest) -> SnapshotRequest:
            if r.state is not RequestState.REQUESTED:
                return replace(r, chunks=chunks)
            return replace(r, state=RequestState.RUNNING, started_at=time.time(), chunks=chunks)

        return self.change(table, request_id, start)

    def finished(
        self, table: TableName, request_id: str, rows: int, error: str | None = None
    ) -> SnapshotRequest | None:
        state = RequestState.DONE if error is None else RequestState.FAILED
        return self.change(
            table,
            request_id,
            lambda r: replace(r, state=state, finished_at=time.time(), rows=rows, error=error),
        )


def _snapshotting(request: SnapshotRequest) -> TableSnapshotting:
    since = time.strftime("%H:%M:%S", time.gmtime(request.requested_at))
    return TableSnapshotting(
        f"table {request.table} is already being re-snapshotted (request {request.request_id}, "
        f"{request.state.value}, asked at {since} UTC); wait until `cdcctl changefeed query` "
        "shows it done or failed"
    )


def refusal(config: ChangefeedConfig, table: TableName) -> str | None:
    """Why the changefeed's configuration rules out a re-snapshot of ``table``; None if not.

    Fails closed where the repair's writes would not be the rows the stream delivers:
    column rules (a predicate over hidden or masked columns, rows to project) and event
    filters (rows the changefeed drops on purpose, deletes it keeps) are not handled.
    """
    kind = kind_of(config.sink_uri)
    if kind.no_resnapshot:
        return f"the sink ({config.sink_uri.scheme}://) cannot take it: {kind.no_resnapshot}"
    if config.columns.for_table(table) is not None:
        return (
            f"table {table} has column rules (selectors or masks); a re-snapshot of it is "
            "not supported yet"
        )
    if EventFilter(config.event_filters, config.case_sensitive).applies_to(table):
        return (
            f"an event filter matches table {table} (the downstream holds only some of its "
            "rows on purpose); a re-snapshot of it is not supported yet"
        )
    return None


def not_ready(
    table: TableName, entry: TableEntry | None, records: Sequence[ChunkRecord]
) -> str | None:
    """Why ``table`` cannot be re-snapshotted now, in one line; None when it can.

    It must stream: its task runs, its record is running with a checkpoint, and its own
    snapshot is over, every chunk done and the checkpoint at or past the highest high
    watermark (every change after it is delivered whatever the chunk records say). Until
    then the table's hand-off gate reads those chunk records, which a re-snapshot's plan
    replaces (``records``: the table's chunk records now).
    """
    if entry is None or entry.task is None:
        return f"the changefeed does not replicate table {table}"
    record = entry.record
    if entry.task.state is not TaskState.RUN or record is None:
        return f"table {table} is not running (its task is {entry.task.state.value})"
    if record.state is not TableState.RUNNING or entry.checkpoint is None:
        return (
            f"table {table} is not streaming (state {record.state.value}"
            + (f": {record.error}" if record.error else "")
            + "); it can be re-snapshotted once it runs"
        )
    if record.reread_from is not None or record.pending_until is not None:
        return f"table {table} is reading snapshot chunks again after a DDL; ask again later"
    own = [r for r in records if r.request is None]
    pending = [r for r in own if not r.done]
    if pending:
        return (
            f"table {table} is still snapshotting ({len(own) - len(pending)} of {len(own)} "
            "chunks done); wait for its snapshot to finish"
        )
    marks = [r.high_watermark for r in own if r.high_watermark is not None]
    if marks and max(m.key() for m in marks) > entry.checkpoint.key():
        return (
            f"table {table} is still handing its snapshot over to the binlog (checkpoint "
            f"{entry.checkpoint} before the last chunk's high watermark); ask again in a moment"
        )
    return None
