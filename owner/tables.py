"""The owner's fenced writes to the tables of one changefeed.

``TaskWriter`` makes the owner's changes, each an etcd transaction that is
fenced by the owner's term and also requires the changefeed to be the same
incarnation (its info key's create revision), so a changefeed removed
meanwhile gets no new keys. The owner reads the tables with
``cdc.changefeed.read_tables``, as the admin API does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cdc.changefeed import Changefeed, TableTask
from cdc.store import (
    Absent,
    Condition,
    CreateRevisionIs,
    Delete,
    DeletePrefix,
    EtcdStore,
    Fence,
    ModRevisionIs,
    Put,
)
from cdc.store.keys import SnapshotChunkKey, SnapshotShareKey

__all__ = ["MAX_CREATED_AT_ONCE", "TaskWriter"]

#: Operations per transaction (etcd's default limit is 128).
_TXN_OPS = 96
#: The most tasks ``TaskWriter.create_all`` writes in its one transaction (with one more
#: put and one more condition of the caller's, and the fence).
MAX_CREATED_AT_ONCE = _TXN_OPS - 4


class TaskWriter:
    """The owner's writes to the tables of one changefeed incarnation (see module doc)."""

    def __init__(self, store: EtcdStore, fence: Fence, changefeed: Changefeed) -> None:
        self.store = store
        self.fence = fence
        self.cf = changefeed.changefeed_id
        self._same_changefeed = CreateRevisionIs(
            store.keys.changefeed_info(self.cf), changefeed.created
        )

    def create(self, table: str, task: TableTask) -> bool:
        """Creates the table's task; False if it exists (or the changefeed changed)."""
        key = self.store.keys.task(self.cf, table)
        return self.store.txn(
            [self._same_changefeed, Absent(key)], [Put(key, task.to_dict())], fence=self.fence
        )

    def create_all(self, tasks: Mapping[str, TableTask], when: Condition, also: Put) -> bool:
        """Creates every task of ``tasks`` and writes ``also`` in one transaction, if
        ``when`` holds and none of the tasks exists; whether it was written. At most
        ``MAX_CREATED_AT_ONCE`` tasks (``ValueError``)."""
        if len(tasks) > MAX_CREATED_AT_ONCE:
            raise ValueError(
                f"{len(tasks)} tasks in one transaction, {MAX_CREATED_AT_ONCE} at most"
            )
        keys = {table: self.store.keys.task(self.cf, table) for table in tasks}
        conditions: list[Condition] = [self._same_changefeed, when]
        conditions.extend(Absent(key) for key in keys.values())
        ops = [Put(keys[table], task.to_dict()) for table, task in tasks.items()]
        return self.store.txn(conditions, [*ops, also], fence=self.fence)

    def replace(self, table: str, task: TableTask, revision: int) -> bool:
        """Rewrites the task read at ``revision``; False if it changed meanwhile."""
        key = self.store.keys.task(self.cf, table)
        return self.store.txn(
            [self._same_changefeed, ModRevisionIs(key, revision)],
            [Put(key, task.to_dict())],
            fence=self.fence,
        )

    def replace_all(self, changes: Sequence[tuple[str, TableTask, int]]) -> list[str]:
        """``replace`` for many tables (``(table, task, revision)``), up to 48 per
        transaction; a transaction refused because one task changed meanwhile is made
        again table by table. The tables rewritten."""
        done: list[str] = []
        for first in range(0, len(changes), _TXN_OPS // 2):
            batch = changes[first : first + _TXN_OPS // 2]
            conditions: list[Condition] = [self._same_changefeed]
            ops: list[Put] = []
            for table, task, revision in batch:
                key = self.store.keys.task(self.cf, table)
                conditions.append(ModRevisionIs(key, revision))
                ops.append(Put(key, task.to_dict()))
            applied = self.store.txn(conditions, ops, fence=self.fence)
            if applied:
                done.extend(table for table, _task, _revision in batch)
                continue
            done.extend(t for t, task, revision in batch if self.replace(t, task, revision))
        return done

    def remove(self, tables: Iterable[str]) -> None:
        """Deletes the tasks, records, snapshot chunks and shares of ``tables``, and an
        operator's re-snapshot request of them (pipelines stop; a capture running a share
        records nothing more)."""
        keys = self.store.keys
        ops: list[Delete | DeletePrefix] = []
        for table in tables:
            ops.append(Delete(keys.task(self.cf, table)))
            ops.append(Delete(keys.table_checkpoint(self.cf, table)))
            ops.append(DeletePrefix(keys.prefix_of(SnapshotChunkKey, self.cf, table)))
            ops.append(DeletePrefix(keys.prefix_of(SnapshotShareKey, self.cf, table)))
            ops.append(Delete(keys.snapshot_plan(self.cf, table)))
            ops.append(Delete(keys.snapshot_request(self.cf, table)))
        for first in range(0, len(ops), _TXN_OPS):
            self.store.txn([self._same_changefeed], ops[first : first + _TXN_OPS], fence=self.fence)

    def put_barrier(self, value: dict) -> bool:
        """Writes the changefeed's barrier; False if the changefeed changed."""
        key = self.store.keys.barrier(self.cf)
        return self.store.txn([self._same_changefeed], [Put(key, value)], fence=self.fence)
