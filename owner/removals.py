"""Removing the tables new table rules no longer match, without late writes downstream.

A removed table's pipeline shares its capture's sink: rows of the table can still
sit in a lane, or a lane can be retrying them, when the table's task goes. Were
its keys deleted at once, the table could be added back (by another update) and
its new pipeline's rows overtaken by the old ones. So a removal is the first half
of a move (``cdc/changefeed/tables.py``)::

    update applied    task {A, stop, removing}            (``mark``, step 7 of
                                                           owner/table_update.py)
    each owner cycle  the record answers that task (A stopped the pipeline after a
                      flush), or A is gone (its lease fences its writes), and no
                      share of the table's snapshot is open on a live capture
                      (a share runs to its end; one open on no live capture is
                      stopped first, so none takes it)
                          ──► task, record, chunks, shares deleted (``finish``)

A table still being removed is not added back: an update that would add it waits
until it is gone. One exception is timed: a share the holder stopped (its snapshot
met a DDL) may have had a Spark job running on its capture, which ends unseen; a
table removed with such a share on a live capture is held back from being added
again for ``READD_HOLD_SECONDS`` (the sink's retry time) after its removal.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import replace

from cdc.changefeed import ChangefeedStatus, TableTask
from cdc.changefeed.snapshot_shares import ShareBook, ShareState
from cdc.changefeed.store import ChangefeedStore
from cdc.changefeed.table_entries import TableEntry
from cdc.changefeed.table_update import held_back
from cdc.logs import ContextLogger
from cdc.model.schema import TableName
from cdc.store import EtcdStore, Fence
from owner.tables import TaskWriter

__all__ = ["Removals"]


class Removals:
    """The removals of one changefeed incarnation (see the module docstring)."""

    def __init__(
        self,
        store: EtcdStore,
        fence: Fence,
        changefeed_id: str,
        writer: TaskWriter,
        log: ContextLogger,
    ) -> None:
        self.store = store
        self.fence = fence
        self.changefeed_id = changefeed_id
        self.writer = writer
        self.log = log
        self._shares = ShareBook(store, changefeed_id)

    def mark(self, tables: Collection[str], entries: Mapping[str, TableEntry]) -> bool:
        """Asks the pipelines of ``tables`` to stop for their removal (a table already
        marked, or gone, is left as it is: an owner finishing another's plan); whether
        every one of them is marked or gone. ``entries`` may lag the owner's own last
        writes (they come from its mirrors): a task found changed is read again."""
        changes: list[tuple[str, TableTask, int]] = []
        for table in tables:
            entry = entries.get(table)
            if entry is None or entry.task is None or entry.task.removing:
                continue
            changes.append((table, entry.task.removal(), entry.task_revision))
        done = set(self.writer.replace_all(changes))
        for table, _task, _revision in changes:
            if table not in done and not self._mark_again(table):
                return False
        for table in sorted(done):
            self.log.info("table %s: stop (removed by the table rules)", table)
        return True

    def _mark_again(self, table: str) -> bool:
        key = self.store.keys.task(self.changefeed_id, table)
        for _ in range(3):
            item = self.store.get(key)
            if item is None:
                return True
            task = TableTask.from_dict(item.json())
            if task.removing:
                return True
            if self.writer.replace(table, task.removal(), item.mod_revision):
                self.log.info("table %s: stop (removed by the table rules)", table)
                return True
        return False

    def finish(self, removing: Mapping[str, TableEntry], captures: Collection[str]) -> list[str]:
        """Deletes the keys of the tables whose removal is complete; those tables."""
        done: list[str] = []
        held: list[str] = []
        for table, entry in removing.items():
            assert entry.task is not None
            if not (entry.idle or entry.task.capture_id not in captures):
                continue
            running, stopped_live = self._shares_of(table, captures)
            if running:
                continue
            done.append(table)
            if stopped_live:
                held.append(table)
        if not done:
            return done
        if held:
            now = time.time()

            def hold(status: ChangefeedStatus) -> ChangefeedStatus:
                return status.changed(removed_at=held_back(status.removed_at, held, now))

            ChangefeedStore(self.store).update_status(self.changefeed_id, hold, fence=self.fence)
        self.writer.remove(done)
        self.log.info("tables removed: %s (their pipelines stopped)", ", ".join(done))
        return done

    def _shares_of(self, table: str, captures: Collection[str]) -> tuple[bool, bool]:
        """Whether a share of the table's snapshot is open on a live capture (it runs to
        its end) and whether one was stopped on a live capture (a job of it may have been
        running); a share open on no live capture is stopped, so that none takes it."""
        running = stopped_live = False
        for held in self._shares.held(TableName.parse(table)):
            share = held.share
            if share.state is ShareState.STOPPED and share.capture in captures:
                stopped_live = True
            if share.state is not ShareState.OPEN:
                continue
            if share.capture in captures:
                running = True
                continue
            stopped = replace(share, state=ShareState.STOPPED)
            if not self._shares.swap(held, stopped, fence=self.fence):
                running = True  # changed meanwhile (given to a capture): read again next cycle
        return running, stopped_live
