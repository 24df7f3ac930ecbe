"""A large table's snapshot chunks shared out over the captures by the owner (issue #16).

The capture holding the table (its table pipeline) anchors the snapshot and plans the
chunks as always (``snapshot_progress``); a plan of more than ``SHARE_THRESHOLD``
chunks is then published in shares of ``SHARE_CHUNKS`` consecutive chunks (all but the
plan's tail, the chunk open above, which the holder reads at once), and the owner gives
each share to a live capture, a few at a time per capture, as they finish::

    holder      plan (chunk records) ─► publish: snapshot-plan (schema, chunks shared),
                                        snapshot-share/0..k, open, no capture
                                    ─► the tail read on its own capture meanwhile
    owner       open share on no live capture ─► capture X   (fenced, compare-and-swap;
                at most SHARES_PER_CAPTURE open per capture; a lost capture's are given
                to another: the share's revision moves, so X's late writes fail)
    capture X   runs the share's pending chunks as Spark tasks (its snapshot scheduler),
                records each done only while the share is still at the revision it
                took (``mark_done``), then: done | changed (a chunk met another schema,
                ``changed_by``) | failed (``error``)
    holder      every share done ─► hand-off as always (the gate reads the chunk records)
                a share changed ─► the open ones stopped; the gate holds the pending
                chunks (docs/ddl-during-snapshot.md); a share failed ─► the table fails
                restarted (another capture, a retry) ─► changed/failed/stopped reopened

States::

    open ──(every chunk done)──► done
      ├──(a chunk met another schema)──► changed      ┐
      ├──(a chunk failed)──► failed                   ├──(the holder starts again)──► open
      └──(another share changed: the holder)──► stopped┘

Keys (``cdc.store.keys``): ``snapshot-plan/<cf>/<table>``, ``snapshot-share/<cf>/<table>/<n>``;
values carry ``"v": 1``. A share is a range of chunk numbers, never a list, so what the
owner reads grows with shares, not chunks (a 100M-row table: about 770 shares).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdc.changefeed.snapshot_progress import ChunkStateError, SnapshotProgress
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.records import ChunkRecord, ChunkState
from cdc.store import Absent, EtcdStore, Fence, ModRevisionIs, Put, Versioned
from cdc.store.keys import SnapshotShareKey

__all__ = [
    "SHARES_PER_CAPTURE",
    "SHARE_CHUNKS",
    "SHARE_THRESHOLD",
    "Share",
    "ShareBook",
    "ShareRevoked",
    "ShareState",
    "SharedPlan",
    "shared",
]

#: Chunks per share: two of a capture's Spark jobs of one table (``batch_chunks`` 8).
SHARE_CHUNKS = 16
#: A plan of more chunks than this is shared out (about 260k rows at the default size).
SHARE_THRESHOLD = 32
#: Open shares the owner gives one capture at a time: one running, the next queued.
SHARES_PER_CAPTURE = 3
_FORMAT = 1
_BATCH = 64


def shared(chunks: int) -> bool:
    """Whether a plan of ``chunks`` chunks is shared out over the captures."""
    return chunks > SHARE_THRESHOLD


class ShareRevoked(RuntimeError):
    """The share was given to another capture, or stopped: this capture records nothing."""


class ShareState(enum.Enum):
    """See the module docstring's diagram."""

    OPEN = "open"
    DONE = "done"
    CHANGED = "changed"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Share:
    """Chunks ``first`` to ``last - 1`` of a plan; ``capture`` runs them while ``open``."""

    n: int
    first: int
    last: int
    capture: str | None = None
    state: ShareState = ShareState.OPEN
    changed_by: Position | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": _FORMAT,
            "n": self.n,
            "first": self.first,
            "last": self.last,
            "capture": self.capture,
            "state": self.state.value,
            "changed_by": self.changed_by.to_dict() if self.changed_by else None,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Share:
        if data.get("v") != _FORMAT:
            raise ValueError(f"unsupported snapshot share format {data.get('v')!r}: {data!r}")
        changed = data.get("changed_by")
        return cls(
            n=int(data["n"]),
            first=int(data["first"]),
            last=int(data["last"]),
            capture=data.get("capture"),
            state=ShareState(data["state"]),
            changed_by=Position.from_dict(changed) if changed else None,
            error=data.get("error"),
        )


@dataclass(frozen=True)
class SharedPlan:
    """What a capture running a share needs besides the chunk records: the schema the
    snapshot reads with, and how many of the plan's chunks its shares cover (all but
    the tail, which the holder reads itself)."""

    schema: TableSchema
    chunks: int

    def to_dict(self) -> dict[str, Any]:
        return {"v": _FORMAT, "schema": self.schema.to_dict(), "chunks": self.chunks}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SharedPlan:
        if data.get("v") != _FORMAT:
            raise ValueError(f"unsupported snapshot plan format {data.get('v')!r}")
        return cls(TableSchema.from_dict(data["schema"]), int(data["chunks"]))


@dataclass(frozen=True)
class HeldShare:
    """A share as read, with the key and revision its writes compare against."""

    key: str
    changefeed_id: str
    table: TableName
    share: Share
    revision: int


class ShareBook:
    """The shares of one changefeed's tables (see the module docstring)."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id
        self.progress = SnapshotProgress(store, changefeed_id)

    def _share_key(self, table: TableName, n: int) -> str:
        return str(self.store.keys.snapshot_share(self.changefeed_id, str(table), n))

    def prefix(self, table: TableName) -> str:
        """The range of ``table``'s share keys."""
        return self.store.keys.prefix_of(SnapshotShareKey, self.changefeed_id, str(table))

    # --- the holder's side ----------------------------------------------------------------

    def publish(self, table: TableName, schema: TableSchema, chunks: int) -> int:
        """The plan's chunks 0 to ``chunks`` - 1 in shares, unless published already
        (create-only, in batches; shares are written before the plan key, so a plan key
        means all its shares); how many chunks the published shares cover."""
        plan_key = str(self.store.keys.snapshot_plan(self.changefeed_id, str(table)))
        published = self.store.get(plan_key)
        if published is not None:
            return SharedPlan.from_dict(published.json()).chunks
        shares = [
            Share(n, first, min(first + SHARE_CHUNKS, chunks))
            for n, first in enumerate(range(0, chunks, SHARE_CHUNKS))
        ]
        for start in range(0, len(shares), _BATCH):
            batch = shares[start : start + _BATCH]
            for share in batch:  # each alone: a batch half written by a crash is finished
                key = self._share_key(table, share.n)
                self.store.txn([Absent(key)], [Put(key, share.to_dict())])
        self.store.txn([Absent(plan_key)], [Put(plan_key, SharedPlan(schema, chunks).to_dict())])
        return chunks

    def held(self, table: TableName) -> list[HeldShare]:
        """The table's shares in order."""
        return [self.decode(item) for item in self.store.get_prefix(self.prefix(table))]

    def decode(self, item: Versioned) -> HeldShare:
        key = self.store.keys.parse(item.key, SnapshotShareKey)
        return HeldShare(
            item.key,
            key.changefeed_id,
            TableName.parse(key.table),
            Share.from_dict(item.json()),
            item.mod_revision,
        )

    def reopen(self, table: TableName) -> int:
        """Changed, failed and stopped shares open again, on no capture (the holder starts
        the table again); how many."""
        count = 0
        for held in self.held(table):
            if held.share.state in (ShareState.CHANGED, ShareState.FAILED, ShareState.STOPPED):
                share = replace(
                    held.share, state=ShareState.OPEN, capture=None, changed_by=None, error=None
                )
                count += self.swap(held, share)
        return count

    def stop_open(self, table: TableName) -> None:
        """Every open share stopped: its capture records nothing more of it."""
        for _ in range(16):
            left = [h for h in self.held(table) if h.share.state is ShareState.OPEN]
            if not left:
                return
            for held in left:
                self.swap(held, replace(held.share, state=ShareState.STOPPED))
        raise ChunkStateError(f"the open shares of {table} kept changing while being stopped")

    def swap(self, held: HeldShare, share: Share, *, fence: Fence | None = None) -> bool:
        """``share`` written over ``held`` if it is still at its revision (``fence``: the
        owner's term, for the owner's writes); whether it was."""
        return self.store.txn(
            [ModRevisionIs(held.key, held.revision)], [Put(held.key, share.to_dict())], fence=fence
        )

    # --- a running capture's side -----------------------------------------------------------

    def proof(self, held: HeldShare) -> int | None:
        """The etcd revision at which ``held`` is still as its capture took it, the fence
        token of the share's chunk writes (``cdc.sink.mysql.chunkfence``); None when it is
        not. The owner gives a share to another capture by rewriting it, so later."""
        item, revision = self.store.get_with_revision(held.key)
        return revision if item is not None and item.mod_revision == held.revision else None

    def plan(self, table: TableName) -> SharedPlan | None:
        item = self.store.get(self.store.keys.snapshot_plan(self.changefeed_id, str(table)))
        return None if item is None else SharedPlan.from_dict(item.json())

    def records(self, table: TableName, share: Share) -> list[ChunkRecord]:
        """The chunk records of ``share`` (one read each: chunk keys do not sort by number)."""
        out = []
        for n in range(share.first, share.last):
            item = self.store.get(self.store.keys.snapshot_chunk(self.changefeed_id, str(table), n))
            if item is None:
                raise ChunkStateError(f"chunk {table}:{n} of a published plan is missing")
            out.append(ChunkRecord.from_dict(item.json()))
        return out

    def mark_done(
        self, held: HeldShare, chunk: SnapshotChunk, high_watermark: Position, rows: int
    ) -> None:
        """pending -> done while ``held`` is still at its revision; ``ShareRevoked`` if not."""
        key = str(self.store.keys.snapshot_chunk(self.changefeed_id, str(chunk.table), chunk.n))
        for _ in range(16):
            item = self.store.get(key)
            if item is None:
                raise ChunkStateError(f"chunk {chunk.chunk_id} is not planned (key {key} missing)")
            record = ChunkRecord.from_dict(item.json())
            if record.done:
                return
            done = ChunkRecord(
                record.chunk, ChunkState.DONE, high_watermark, rows, record.planned_at, time.time()
            )
            guards = [ModRevisionIs(key, item.mod_revision), ModRevisionIs(held.key, held.revision)]
            if self.store.txn(guards, [Put(key, done.to_dict())]):
                return
            current = self.store.get(held.key)
            if current is None or current.mod_revision != held.revision:
                raise ShareRevoked(f"share {held.share.n} of {chunk.table} was taken back")
        raise ChunkStateError(f"chunk {chunk.chunk_id} kept changing while being recorded")

    def end(
        self,
        held: HeldShare,
        state: ShareState,
        *,
        changed_by: Position | None = None,
        error: str | None = None,
    ) -> bool:
        """The share's end, written only while it is still at its revision."""
        ended = replace(held.share, state=state, changed_by=changed_by, error=error)
        return self.swap(held, ended)


def open_shares(shares: Sequence[HeldShare]) -> list[HeldShare]:
    return [h for h in shares if h.share.state is ShareState.OPEN]
