"""The console's reads from etcd, through the readers the owner and the admin API use.

    changefeeds()      ChangefeedStore.list + each changefeed's tables (its lag)
    changefeed(id)     ChangefeedStore.get + read_tables + SnapshotProgress + barrier/<cf>
    lags()             each changefeed's lag, for the lag history

Each changefeed keeps a ``TableReader``: a table's task and record are decoded
once per change, not once per poll (a console polls every two seconds, the
lag history samples every few). One lock: the listener is threaded and a
``TableReader`` is not.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from capture.http.views import (
    barrier_view,
    changefeed_lag,
    changefeed_summary,
    masked,
    table_view,
)
from cdc.changefeed import Barrier, Changefeed, ChangefeedStore, TableEntry, TableReader
from cdc.changefeed.history import history_of
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.model.schema import TableName
from cdc.store import EtcdStore
from cdc.store.keys import split_table

__all__ = ["ConsoleReader"]


class ConsoleReader:
    """Reads for the JSON API; every answer is masked (``views.masked``)."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.changefeeds_store = ChangefeedStore(store)
        self._tables: dict[str, TableReader] = {}
        self._lock = threading.Lock()

    def _entries(self, changefeed_id: str) -> dict[str, TableEntry]:
        with self._lock:
            reader = self._tables.get(changefeed_id)
            if reader is None:
                reader = self._tables[changefeed_id] = TableReader(self.store, changefeed_id)
            return reader.read()

    def _forget_others(self, kept: set[str]) -> None:
        with self._lock:
            for gone in set(self._tables) - kept:
                del self._tables[gone]

    def _listed(self) -> list[Changefeed]:
        listed = self.changefeeds_store.list()
        self._forget_others({cf.changefeed_id for cf in listed})
        return listed

    def lags(self) -> dict[str, float | None]:
        """Each changefeed's lag now (``views.changefeed_lag``)."""
        now = time.time()
        return {
            cf.changefeed_id: changefeed_lag(self._entries(cf.changefeed_id).values(), now)
            for cf in self._listed()
        }

    def changefeeds(self) -> list[dict[str, Any]]:
        """Every changefeed as the list shows it, sorted by id."""
        now = time.time()
        out = []
        for cf in self._listed():
            lag = changefeed_lag(self._entries(cf.changefeed_id).values(), now)
            out.append(changefeed_summary(cf, lag))
        return masked(out)

    def changefeed(self, changefeed_id: str) -> dict[str, Any]:
        """One changefeed with its configuration (passwords masked), barrier, skipped DDL
        and tables, and its audit history (read-only); ``ChangefeedNotFound`` when there is
        none."""
        cf = self.changefeeds_store.get(changefeed_id)
        now = time.time()
        entries = self._entries(changefeed_id)
        progress = SnapshotProgress(self.store, changefeed_id)
        tables = [
            table_view(entry, progress.table_progress(TableName(*split_table(name))), now)
            for name, entry in entries.items()
        ]
        barrier = self.store.get(self.store.keys.barrier(changefeed_id))
        detail = changefeed_summary(cf, changefeed_lag(entries.values(), now))
        detail.update(
            config=cf.config.to_dict(mask=True),
            barrier=barrier_view(None if barrier is None else Barrier.from_dict(barrier.json())),
            skipped_ddl=[
                {
                    "position": str(s.position),
                    "kind": s.kind,
                    "statement": s.statement,
                    "reason": s.reason,
                    "at": s.at,
                }
                for s in cf.status.skipped_ddl
            ],
            tables=tables,
            history=[e.to_dict() for e in history_of(self.store, changefeed_id)],
        )
        return masked(detail)
