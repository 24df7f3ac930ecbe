"""Shared pieces of the cluster tests: waiting, captures under leases, changefeed configs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from cdc.changefeed import ChangefeedStore, TableRecord, TableState, TableTask, TaskState
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from cdc.model.position import Position
from cdc.store import Election, EtcdStore, KeepAlive, Lease, ModRevisionIs, Put
from cdc.store.keys import TaskKey
from owner.owner import Owner, OwnerOptions
from owner.retry import RetryPolicy
from processor.pipeline import PipelineOptions
from processor.processor import Processor


def changefeed_config(
    source_uri: str, sink_uri: str, rules: list[str], **more: Any
) -> ChangefeedConfig:
    """A changefeed whose passwords are stored (test servers have generated ones)."""
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": more.pop("changefeed_id", "cf1"),
            "source_uri": source_uri,
            "sink_uri": sink_uri,
            "rules": rules,
            **more,
        },
    )
    return replace(config, store_credentials=True)


class Capture:
    """A capture key under a lease, kept alive until ``kill`` (the lease is revoked)."""

    def __init__(self, store: EtcdStore, capture_id: str, ttl: int = 3) -> None:
        self.store, self.capture_id = store, capture_id
        self.lease: Lease = store.grant_lease(ttl)
        self.keepalive = KeepAlive(self.lease).start()
        store.put(store.keys.capture(capture_id), {"id": capture_id}, lease=self.lease)

    def kill(self) -> None:
        self.keepalive.stop()
        self.lease.revoke()


def tasks(store: EtcdStore, cf: str) -> dict[str, tuple[TableTask, int]]:
    out = {}
    for item in store.get_prefix(store.keys.prefix_of(TaskKey, cf)):
        key = store.keys.parse(item.key)
        out[key.table] = (TableTask.from_dict(item.json()), item.mod_revision)  # type: ignore[attr-defined]
    return out


def running_on(store: EtcdStore, cf: str) -> dict[str, str]:
    """table -> capture for every task that says run."""
    return {
        t: task.capture_id
        for t, (task, _) in tasks(store, cf).items()
        if task.state is TaskState.RUN
    }


def answer_tasks(store: EtcdStore, cf: str, captures: set[str], checkpoint: Position) -> int:
    """Plays the processors of ``captures``: report running / stopped on every task naming them.

    Returns how many records were written (each guarded by the task's revision).
    """
    written = 0
    for table, (task, revision) in tasks(store, cf).items():
        if task.capture_id not in captures:
            continue
        state = TableState.RUNNING if task.state is TaskState.RUN else TableState.STOPPED
        key = store.keys.table_checkpoint(cf, table)
        current = store.get(key)
        if current is not None:
            old = TableRecord.from_dict(current.json())
            if (
                old.task_revision == revision
                and old.state is state
                and old.checkpoint == checkpoint
            ):
                continue
        record = TableRecord(task.capture_id, state, revision, checkpoint)
        if store.txn(
            [ModRevisionIs(store.keys.task(cf, table), revision)], [Put(key, record.to_dict())]
        ):
            written += 1
    return written


def status(store: EtcdStore, cf: str = "cf1"):
    return ChangefeedStore(store).get(cf).status


def checksums(server: Any, db: str, tables: list[str]) -> dict[str, tuple[int, int]]:
    """(count, CRC sum) of every table, over all its columns in order."""
    conn = server.connect()
    out = {}
    try:
        with conn.cursor() as cur:
            for table in tables:
                cur.execute(
                    "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                    " WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                    (db, table),
                )
                names = [name for (name,) in cur.fetchall()]
                if not names:
                    out[table] = (-1, -1)
                    continue
                # each column with its NULL marker: CONCAT_WS skips NULLs
                columns = ", ".join(f"ISNULL(`{n}`), `{n}`" for n in names)
                cur.execute(
                    f"SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', {columns}))), 0)"
                    f" FROM `{db}`.`{table}`"
                )
                count, total = cur.fetchone()
                out[table] = (int(count), int(total))
    finally:
        conn.close()
    return out


FAST_OWNER = OwnerOptions(cycle_interval=0.2, retry=RetryPolicy(initial=0.5), barrier_interval=0.1)


def _need(spark: Any) -> Any:
    if spark is None:
        raise RuntimeError("this test node was started without Spark, but a table needs a snapshot")
    return spark


class Node:
    """One capture: its key under a lease, its processor, and the owner when elected."""

    def __init__(self, store: EtcdStore, name: str, spark: Any = None) -> None:
        self.name = name
        self.capture = Capture(store, name)
        self.processor = Processor(
            store,
            name,
            lambda _config: _need(spark),
            options=PipelineOptions(checkpoint_interval=0.3, batch_chunks=4),
            interval=0.2,
        )
        self.processor.start()
        self.owner: Owner | None = None
        self.election: Election | None = None

    def lead(self, store: EtcdStore) -> None:
        self.election = Election(store, self.name, ttl=5)
        self.owner = Owner(store, self.name, self.election.campaign(timeout=10), FAST_OWNER)
        self.owner.start()

    def kill(self) -> None:
        """As a crash looks to the others: pipelines gone, lease gone, no final report."""
        self.processor.suspend()
        self.processor.stop()
        if self.owner is not None:
            self.owner.stop()
        self.capture.kill()
        if self.election is not None:
            self.election.resign()
