"""The DDL of a pull changefeed, from the owner to the rings on the capture serving it.

A pull changefeed's DDL reaches its clients as an event of the stream, in
binlog order. The owner applies DDL (at the barrier) but the rings live on
the capture running the tables, so the owner records the DDL in etcd and
that capture hands it in::

    owner, at the barrier before D: every table's rows before D are acked
        1. record D in subscription-ddl/<cf>          (DdlLog.record)
        2. move barrier/<cf> past D                   (as for every sink)
    serving capture (DdlFeed.due), before handing in rows beyond the barrier limit it
    last read, and at every flush:
        3. read barrier/<cf>, then subscription-ddl/<cf>
        4. a recorded DDL newer than the last one handed in goes into the rings first

Why that is in order. A barrier read at step 3 with limit L means every DDL at
or before L was applied before it was written (a DDL barrier's limit lies
just before its DDL; a resolved barrier has no DDL ahead), so the record read
after it holds the last of them: rows up to L need no other read. Rows beyond
L come only after the barrier moved past some D, i.e. after step 1 for D: the
read that precedes them finds D. The record keeps only the last DDL: the
owner applies D2 only once the checkpoint passed the limit before D2, which
takes a flush on the serving capture after D1, whose read (step 3) handed D1
in, and flushes wait until the clients acked everything handed in.

At least once: a capture that starts serving the changefeed (after a restart
or a move) hands in the recorded DDL again before anything else; its clients
may have seen it. A consumer recognises a DDL it applied by its position.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from cdc.changefeed import Barrier
from cdc.model.events import DdlEvent, DdlKind
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.store import EtcdStore, ValueFormatError

__all__ = ["FORMAT_VERSION", "DdlFeed", "DdlLog", "ddl_from_dict", "ddl_to_dict"]

FORMAT_VERSION = 1


def ddl_to_dict(ddl: DdlEvent) -> dict[str, Any]:
    return {
        "position": ddl.position.to_dict(),
        "schema": ddl.schema,
        "tables": [str(table) for table in ddl.tables],
        "kind": ddl.kind.value,
        "statement": ddl.statement,
    }


def ddl_from_dict(data: Mapping[str, Any], key: str = "") -> DdlEvent:
    """What :func:`ddl_to_dict` wrote; ``ValueFormatError`` naming ``key`` otherwise."""
    try:
        return DdlEvent(
            Position.from_dict(data["position"]),
            str(data["schema"]),
            tuple(TableName.parse(str(t)) for t in data["tables"]),
            DdlKind.parse(str(data["kind"])),
            str(data["statement"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueFormatError(f"DDL record at {key or '?'} is malformed: {exc}") from None


class DdlLog:
    """The ``subscription-ddl/<cf>`` record of one changefeed (module docstring)."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id
        self._key = store.keys.subscription_ddl(changefeed_id)
        self._barrier = store.keys.barrier(changefeed_id)

    def record(self, ddl: DdlEvent) -> None:
        """Step 1: ``ddl`` is the last one applied. A record of a later DDL stays (a
        deposed owner applying an old DDL again moves nothing back)."""
        value = {"v": FORMAT_VERSION, "ddl": ddl_to_dict(ddl), "updated_at": time.time()}

        def newer(old: dict[str, Any] | None) -> dict[str, Any] | None:
            if old is not None and old.get("v") == FORMAT_VERSION:
                recorded = Position.from_dict(old["ddl"]["position"])
                if recorded.key() >= ddl.position.key():
                    return old
            return value

        self.store.update(self._key, newer)

    def read(self) -> tuple[Barrier | None, DdlEvent | None]:
        """Step 3: the barrier, then the recorded DDL (read after it, so it is current
        for every DDL the barrier passed)."""
        barrier_item = self.store.get(self._barrier)
        barrier = None if barrier_item is None else Barrier.from_dict(barrier_item.json())
        item = self.store.get(self._key)
        if item is None:
            return barrier, None
        data = item.json()
        if data.get("v") != FORMAT_VERSION:
            raise ValueFormatError(
                f"DDL record at {item.key} has format version {data.get('v')!r}; this build "
                f"reads version {FORMAT_VERSION}"
            )
        return barrier, ddl_from_dict(data.get("ddl") or {}, item.key)


class DdlFeed:
    """The serving capture's side of the log: which recorded DDL to hand in, and when.

    Thread-safe; ``due`` reads etcd only when rows pass the barrier limit seen at the
    last read, or when asked to (a flush).
    """

    def __init__(self, log: DdlLog) -> None:
        self.log = log
        self._known: Position | None = None
        self._offered: Position | None = None
        self._lock = threading.Lock()

    def due(self, upto: Position | None) -> DdlEvent | None:
        """The recorded DDL to hand in before rows up to ``upto`` (None: read now), once."""
        with self._lock:
            if upto is not None and self._known is not None and upto.key() <= self._known.key():
                return None
            barrier, ddl = self.log.read()
            if barrier is not None and (
                self._known is None or barrier.limit.key() > self._known.key()
            ):
                self._known = barrier.limit
            if ddl is None or (
                self._offered is not None and ddl.position.key() <= self._offered.key()
            ):
                return None
            self._offered = ddl.position
            return ddl
